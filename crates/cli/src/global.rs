//! The options every command takes (connection and output), and the
//! deployment they describe. Its own file so that commands need nothing
//! from `main.rs`.

use std::path::PathBuf;

use redlatch::{Deployment, DeploymentArgs};

use crate::config_file;
use crate::exit::{self, Failure};
use crate::redact;
use crate::secrets;

/// Options every command takes.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Where Redis runs: --redis, --redis-cluster or --sentinel, and TLS files
    #[command(flatten)]
    pub deployment: DeploymentArgs,

    /// Lock settings from a TOML file ([lock], [retry], [connection], and
    /// [redis], [tls] for where Redis runs); `run` follows changes to it
    /// while the command runs
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Redis password, read from the first line of FILE, for every server
    /// URL that has none (a Sentinel group: its master's password). Else
    /// REDLATCH_REDIS_PASSWORD applies. Prefer either to a password in
    /// --redis: the command line is visible to every user in `ps`
    #[arg(long = "redis-password-file", global = true, value_name = "FILE")]
    pub redis_password_file: Option<PathBuf>,

    /// Print data as JSON (status, list, unlock, check, top; refused by run,
    /// which prints no data of its own)
    #[arg(long, global = true)]
    pub json: bool,
}

impl Global {
    /// The deployment the flags, the `--config` file's `[redis]` and `[tls]`,
    /// `REDIS_URL` or the default name, with the password of
    /// `--redis-password-file` or `REDLATCH_REDIS_PASSWORD` in its URLs: exit
    /// 78 for a bad file, 64 for bad flags.
    pub fn deployment(&self) -> Result<Deployment, Failure> {
        // First, so that any message about a bad URL below masks them.
        let env_url = std::env::var("REDIS_URL").ok();
        let args = &self.deployment;
        redact::remember_urls(
            (args
                .redis
                .iter()
                .chain(&args.redis_cluster)
                .chain(&args.sentinel))
            .map(String::as_str)
            .chain(env_url.as_deref()),
        );
        let password = self.redis_password()?;
        let from_file = match &self.config {
            Some(path) => {
                Deployment::load(path).map_err(|error| config_file::config_failure(path, &error))?
            }
            None => None,
        };
        let mut deployment = self
            .deployment
            .deployment(from_file)
            .map_err(|error| Failure::new(exit::USAGE, error.to_string()))?;
        secrets::apply(&mut deployment, password.as_deref());
        Ok(deployment)
    }

    /// True when the servers come from the `--config` file's `[redis]`: no
    /// server flag, no `REDIS_URL`. A mistake in them is the file's (exit 78).
    pub fn servers_from_file(&self) -> bool {
        let args = &self.deployment;
        let flagged =
            !(args.redis.is_empty() && args.redis_cluster.is_empty() && args.sentinel.is_empty())
                || std::env::var("REDIS_URL").is_ok_and(|url| !url.is_empty());
        !flagged
            && self
                .config
                .as_deref()
                .is_some_and(|path| matches!(Deployment::load(path), Ok(Some(_))))
    }

    /// The password of `--redis-password-file`, else `REDLATCH_REDIS_PASSWORD`.
    pub fn redis_password(&self) -> Result<Option<String>, Failure> {
        secrets::password(self.redis_password_file.as_deref())
    }
}

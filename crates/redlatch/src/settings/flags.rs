//! The command-line flags that name a [`Deployment`], shared by every
//! program that takes them (the `redlatch` CLI, the shop's server). Built
//! with the `clap` feature, so the library pulls in no argument parser
//! unless asked.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::settings::deployment::{Deployment, Servers};

/// Where Redis runs and how to reach it safely; flatten it into a clap
/// parser (`#[command(flatten)]`).
///
/// Give one kind of server flag: `--redis` (once for one server, several
/// times for independent Redlock masters), `--redis-cluster` (seed nodes) or
/// `--sentinel` with `--sentinel-master`. With none, the `[redis]` section of
/// the settings file applies, then the `REDIS_URL` variable, then
/// `redis://127.0.0.1:6379`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DeploymentArgs {
    /// Redis server URL, redis://HOST:PORT with optional USER:PASSWORD@ and
    /// /DB (rediss:// for TLS). Give it several times for independent masters: locks are then
    /// Redlock locks, held while a majority of them agrees [env: REDIS_URL]
    #[arg(long, global = true, value_name = "URL")]
    pub redis: Vec<String>,

    /// Redis Cluster seed node URL (repeatable; any one node is enough)
    #[arg(
        long = "redis-cluster",
        global = true,
        value_name = "URL",
        conflicts_with_all = ["redis", "sentinel"]
    )]
    pub redis_cluster: Vec<String>,

    /// Redis Sentinel URL (repeatable); needs --sentinel-master
    #[arg(
        long,
        global = true,
        value_name = "URL",
        conflicts_with = "redis",
        requires = "sentinel_master"
    )]
    pub sentinel: Vec<String>,

    /// Name of the master the Sentinels watch
    #[arg(
        long = "sentinel-master",
        global = true,
        value_name = "NAME",
        requires = "sentinel"
    )]
    pub sentinel_master: Option<String>,

    /// CA certificate (PEM) that signed the servers' certificates, for rediss://
    #[arg(long = "tls-ca", global = true, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// Client certificate (PEM) for servers that check clients; needs --tls-key
    #[arg(
        long = "tls-cert",
        global = true,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert
    #[arg(
        long = "tls-key",
        global = true,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
}

/// Used when neither flags, the settings file nor `REDIS_URL` name a server.
pub(crate) const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

impl DeploymentArgs {
    /// Used when neither flags, the settings file nor `REDIS_URL` name a server.
    pub const DEFAULT_REDIS_URL: &str = DEFAULT_REDIS_URL;

    /// The deployment these flags name; `from_file` is the settings file's
    /// (from `Deployment::load`), used when no server flag was given. TLS
    /// flags replace the file's `[tls]`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the flag.
    pub fn deployment(&self, from_file: Option<Deployment>) -> Result<Deployment> {
        let env_url = std::env::var("REDIS_URL")
            .ok()
            .filter(|url| !url.is_empty());
        self.resolve(from_file, env_url)
    }

    fn resolve(
        &self,
        from_file: Option<Deployment>,
        env_url: Option<String>,
    ) -> Result<Deployment> {
        let flagged = if !self.redis_cluster.is_empty() {
            Some(Servers::Cluster(self.redis_cluster.clone()))
        } else if !self.sentinel.is_empty() {
            let master = self.sentinel_master.clone().ok_or_else(|| {
                Error::InvalidConfig("--sentinel-master: needed with --sentinel".to_owned())
            })?;
            Some(Servers::Sentinel {
                sentinels: self.sentinel.clone(),
                master,
            })
        } else {
            match self.redis.as_slice() {
                [] => None,
                [url] => Some(Servers::Single(url.clone())),
                urls => Some(Servers::Redlock(
                    urls.iter().cloned().map(Servers::Single).collect(),
                )),
            }
        };
        let mut deployment = match (flagged, env_url, from_file) {
            (Some(servers), _, file) => {
                // The file's TLS and replica settings still apply to flagged servers.
                let mut deployment = Deployment::new(servers);
                if let Some(file) = file {
                    deployment.tls = file.tls;
                    deployment.wait_replicas = file.wait_replicas;
                    deployment.replica_timeout = file.replica_timeout;
                }
                deployment
            }
            (None, Some(url), file) => {
                let mut deployment = Deployment::new(Servers::Single(url));
                if let Some(file) = file {
                    deployment.tls = file.tls;
                }
                deployment
            }
            (None, None, Some(file)) => file,
            (None, None, None) => Deployment::new(Servers::Single(DEFAULT_REDIS_URL.to_owned())),
        };
        if self.tls_ca.is_some() || self.tls_cert.is_some() {
            let mut files = deployment.tls.take().unwrap_or_default();
            if let Some(ca) = &self.tls_ca {
                files.ca = Some(ca.clone());
            }
            if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
                files = files.with_client_cert(cert, key);
            }
            deployment.tls = Some(files);
        }
        deployment.validate().map_err(|error| match error {
            Error::InvalidConfig(reason) => Error::InvalidConfig(
                reason
                    .replace("redis.urls", "--redis/--redis-cluster/--sentinel")
                    .replace("redis.master", "--sentinel-master"),
            ),
            other => other,
        })?;
        Ok(deployment)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        deployment: DeploymentArgs,
    }

    fn parse(args: &[&str]) -> std::result::Result<DeploymentArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .map(|cli| cli.deployment)
    }

    #[test]
    fn flags_name_every_kind() {
        let none = parse(&[]).unwrap().resolve(None, None).unwrap();
        assert_eq!(none.servers, Servers::Single(DEFAULT_REDIS_URL.into()));
        let env = parse(&[])
            .unwrap()
            .resolve(None, Some("redis://e".into()))
            .unwrap();
        assert_eq!(env.servers, Servers::Single("redis://e".into()));
        let flag = parse(&["--redis", "redis://f"]).unwrap();
        assert_eq!(
            flag.resolve(None, Some("redis://e".into()))
                .unwrap()
                .servers,
            Servers::Single("redis://f".into())
        );
        let redlock = parse(&["--redis", "redis://a", "--redis", "redis://b"]).unwrap();
        assert!(redlock.resolve(None, None).unwrap().is_redlock());
        let cluster = parse(&[
            "--redis-cluster",
            "redis://a",
            "--redis-cluster",
            "redis://b",
        ])
        .unwrap();
        assert_eq!(
            cluster.resolve(None, None).unwrap().servers,
            Servers::Cluster(vec!["redis://a".into(), "redis://b".into()])
        );
        let sentinel = parse(&[
            "--sentinel",
            "redis://s",
            "--sentinel-master",
            "m",
            "--tls-ca",
            "ca.pem",
        ])
        .unwrap()
        .resolve(None, None)
        .unwrap();
        assert!(matches!(sentinel.servers, Servers::Sentinel { ref master, .. } if master == "m"));
        assert_eq!(sentinel.tls.unwrap().ca, Some("ca.pem".into()));
    }

    #[test]
    fn the_file_applies_without_flags() {
        let file =
            Deployment::from_toml("[redis]\nmode = \"cluster\"\nurls = [\"redis://c\"]").unwrap();
        let args = parse(&[]).unwrap();
        assert_eq!(
            args.resolve(file, None).unwrap().servers,
            Servers::Cluster(vec!["redis://c".into()])
        );
    }

    #[test]
    fn bad_combinations_are_refused() {
        assert!(parse(&["--redis", "redis://a", "--redis-cluster", "redis://b"]).is_err());
        assert!(parse(&["--sentinel", "redis://s"]).is_err());
        assert!(parse(&["--sentinel-master", "m"]).is_err());
        assert!(parse(&["--tls-cert", "c.pem"]).is_err());
        let not_a_url = parse(&["--redis-cluster", "http://x"])
            .unwrap()
            .resolve(None, None);
        assert!(
            not_a_url
                .unwrap_err()
                .to_string()
                .contains("--redis/--redis-cluster/--sentinel")
        );
    }
}

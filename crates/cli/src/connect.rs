//! Settings file and connection, shared by every command.

use std::path::Path;
use std::time::Duration;

use redlatch::{Client, Deployment, Redlock, Servers, Settings};

use crate::Global;

use crate::exit::{self, Failure};

/// Reads `--config` if given: exit 78 when it cannot be read or is invalid.
pub fn load_settings(config: Option<&Path>) -> Result<Settings, Failure> {
    match config {
        None => Ok(Settings::default()),
        Some(path) => Settings::load(path).map_err(|error| config_failure(path, &error)),
    }
}

/// The exit-78 failure for a settings file the library refused.
pub fn config_failure(path: &Path, error: &redlatch::Error) -> Failure {
    let text = error.to_string();
    // The library names the file in most messages; add it where it does not.
    if text.contains(&*path.to_string_lossy()) {
        Failure::new(exit::CONFIG, format!("config {text}"))
    } else {
        Failure::new(exit::CONFIG, format!("config {}: {text}", path.display()))
    }
}

/// Connects to the deployment `global` names with `settings`, `lease` (from
/// `--lease`) overriding the file's default lease. A Redlock deployment
/// (several `--redis`): exit 64, `command` works on one deployment.
/// Unreachable Redis: exit 69.
pub async fn client(
    global: &Global,
    command: &str,
    settings: Settings,
    lease: Option<Duration>,
) -> Result<Client, Failure> {
    let deployment = global.deployment()?;
    if deployment.is_redlock() {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "{command} takes one server, cluster or sentinel group \
                 (several --redis are Redlock masters: run, status)"
            ),
        ));
    }
    let mut builder = deployment
        .builder(settings)
        .map_err(|error| Failure::lib("cannot connect", &error))?;
    // A Sentinel group's URLs are the Sentinels'; the master's password goes here.
    if matches!(deployment.servers, Servers::Sentinel { .. })
        && let Some(password) = global.redis_password()?
    {
        builder = builder.master_auth(None, &password);
    }
    if let Some(lease) = lease {
        builder = builder.default_lease(lease);
    }
    builder
        .connect()
        .await
        .map_err(|error| connect_failure(&deployment, &error))
}

/// Connects every master of a Redlock deployment (several `--redis`).
pub async fn redlock(global: &Global, settings: Settings) -> Result<Redlock, Failure> {
    let deployment = global.deployment()?;
    deployment
        .connect_redlock(settings)
        .await
        .map_err(|error| connect_failure(&deployment, &error))
}

/// Unreachable or refusing Redis (exit 69), or bad TLS files and URLs.
fn connect_failure(deployment: &Deployment, error: &redlatch::Error) -> Failure {
    if error.is_transient() || matches!(error, redlatch::Error::Redis { .. }) {
        Failure::new(
            exit::UNAVAILABLE,
            format!("cannot reach Redis at {}: {error}", deployment.describe()),
        )
    } else {
        Failure::lib("cannot connect", error)
    }
}

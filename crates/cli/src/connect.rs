//! Settings file and connection, shared by every command.

use std::future::Future;
use std::time::Duration;

use redlatch::{Client, Deployment, Redlock, Servers, Settings};

use crate::exit::{self, Failure};
use crate::global::Global;

/// A time limit on connecting besides the connect timeout: `run`'s wait
/// for the lock, and where it was set (`--wait`, `lock.wait_timeout`).
#[derive(Debug, Clone, Copy)]
pub struct WaitLimit {
    /// The wait; zero (try the lock once) leaves the connect timeout alone.
    pub limit: Duration,
    /// Where it was set, for messages.
    pub name: &'static str,
}

/// Connects to the deployment `global` names with `settings`, `lease` (from
/// `--lease`) overriding the file's default lease and `purpose` published
/// beside its holds, within `wait` when given, else within the connect timeout;
/// `deadlock_detection` turns the library's detection on (`run`: a job is
/// an explicit party). A Redlock deployment (several
/// `--redis`): exit 64, `command` works on one deployment. Unreachable
/// Redis, or no answer in time: exit 69.
pub async fn client(
    global: &Global,
    command: &str,
    settings: Settings,
    lease: Option<Duration>,
    purpose: Option<&str>,
    wait: Option<WaitLimit>,
    deadlock_detection: bool,
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
    let connect_timeout = settings.connect_timeout;
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
    if let Some(purpose) = purpose {
        builder = builder.holder_purpose(purpose);
    }
    builder = builder.deadlock_detection(deadlock_detection);
    within(wait, &deployment, builder.connect())
        .await?
        .map_err(|error| connect_failure(global, &deployment, connect_timeout, &error))
}

/// Connects every master of a Redlock deployment (several `--redis`).
///
/// A `wait` shorter than the connect timeout bounds each master's connect
/// rather than the whole (a frozen minority of masters must not keep the
/// majority from running): the masters connect with it as their connect
/// timeout, which is then put back for their reconnects.
pub async fn redlock(
    global: &Global,
    settings: Settings,
    wait: Option<WaitLimit>,
) -> Result<Redlock, Failure> {
    let deployment = global.deployment()?;
    let connect_timeout = settings.connect_timeout;
    let lowered = wait.filter(|wait| !wait.limit.is_zero() && wait.limit < connect_timeout);
    let mut connect_settings = settings;
    if let Some(wait) = lowered {
        connect_settings.connect_timeout = wait.limit;
    }
    let redlock = deployment
        .connect_redlock(connect_settings)
        .await
        .map_err(|error| connect_failure(global, &deployment, connect_timeout, &error))?;
    if lowered.is_some() {
        for client in redlock.clients() {
            let mut restored = client.settings();
            restored.connect_timeout = connect_timeout;
            client
                .update_settings(restored)
                .map_err(|error| Failure::lib("settings", &error))?;
        }
    }
    Ok(redlock)
}

/// Runs `connect`, bounded by `wait` unless it is absent or zero: exit 69
/// naming the limit when it runs out (dropping a connect leaves nothing behind).
async fn within<T>(
    wait: Option<WaitLimit>,
    deployment: &Deployment,
    connect: impl Future<Output = T>,
) -> Result<T, Failure> {
    let Some(wait) = wait.filter(|wait| !wait.limit.is_zero()) else {
        return Ok(connect.await);
    };
    tokio::time::timeout(wait.limit, connect)
        .await
        .map_err(|_| {
            Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "could not connect to {} within {} ({}){}",
                    deployment.describe(),
                    humantime::format_duration(wait.limit),
                    wait.name,
                    tls_hint(deployment)
                ),
            )
        })
}

/// A hint for a connect that timed out on a `rediss://` URL.
fn tls_hint(deployment: &Deployment) -> &'static str {
    if deployment.describe().contains("rediss://") {
        "; a rediss:// URL: does that port speak TLS?"
    } else {
        ""
    }
}

/// Why a connect failed, and its exit status: a mistake in a file (a TLS
/// file, the `--config` file's servers) exit 78, in a flag exit 64; Redis
/// unreachable, refusing us or not answering in time exit 69.
fn connect_failure(
    global: &Global,
    deployment: &Deployment,
    connect_timeout: Duration,
    error: &redlatch::Error,
) -> Failure {
    use redlatch::Error as E;
    let misplaced = if global.servers_from_file() {
        exit::CONFIG
    } else {
        exit::USAGE
    };
    match error {
        E::ConnectTimeout { limit, .. } => {
            let limit_name = if *limit == connect_timeout {
                format!(
                    "connect timeout {}",
                    humantime::format_duration(connect_timeout)
                )
            } else {
                format!(
                    "connect timeout {} per attempt, with retries",
                    humantime::format_duration(connect_timeout)
                )
            };
            Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "could not connect to {} within {} ({limit_name}){}",
                    deployment.describe(),
                    humantime::format_duration(*limit),
                    tls_hint(deployment)
                ),
            )
        }
        E::TlsFile { .. } => Failure::new(exit::CONFIG, format!("TLS file {error}")),
        E::ClusterNode { .. } => Failure::new(misplaced, cluster_advice(global, deployment, error)),
        E::InvalidConfig(_) => Failure::new(misplaced, format!("cannot connect: {error}")),
        _ if error.is_transient()
            || matches!(error, E::Redis { .. } | E::TlsCertificate { .. }) =>
        {
            Failure::new(
                exit::UNAVAILABLE,
                format!("cannot reach Redis at {}: {error}", deployment.describe()),
            )
        }
        _ => Failure::lib("cannot connect", error),
    }
}

/// A failed call on a connected client: as [`Failure::lib`], except that a
/// Redis Cluster node named as one server gets advice (exit 64, or 78 when
/// the `--config` file names it).
pub fn call_failure(global: &Global, context: &str, error: &redlatch::Error) -> Failure {
    if !matches!(error, redlatch::Error::ClusterNode { .. }) {
        return Failure::lib(context, error);
    }
    let code = if global.servers_from_file() {
        exit::CONFIG
    } else {
        exit::USAGE
    };
    let advice = match global.deployment() {
        Ok(deployment) => cluster_advice(global, &deployment, error),
        Err(_) => error.to_string(),
    };
    Failure::new(code, format!("{context}: {advice}"))
}

/// What to do about a Redis Cluster node named as one server.
pub fn cluster_advice(global: &Global, deployment: &Deployment, error: &redlatch::Error) -> String {
    let how = if global.servers_from_file() {
        "set mode = \"cluster\" in the config file's [redis]"
    } else {
        "use --redis-cluster URL instead of --redis"
    };
    let redirect = match error {
        redlatch::Error::ClusterNode { detail, .. } => detail.clone(),
        other => other.to_string(),
    };
    format!(
        "{} is a Redis Cluster node, which serves only the names of its own slots; \
         {how} ({redirect})",
        deployment.describe()
    )
}

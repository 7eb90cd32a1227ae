//! One way to name where Redis runs: one server, a Cluster, a Sentinel group,
//! or independent Redlock masters, each secured by TLS if its URLs say so.
//! The settings file's `[redis]` and `[tls]` sections, the CLI's flags and
//! the shop's flags all end up here.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::tls_files::TlsFiles;

/// Where the locks live.
///
/// ```
/// # #[cfg(feature = "settings-file")] {
/// use redlatch::{Deployment, Servers};
///
/// let deployment = Deployment::from_toml(r#"
///     [redis]
///     mode = "sentinel"
///     urls = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
///     master = "locks"
/// "#)?.expect("a [redis] section");
/// assert!(matches!(deployment.servers, Servers::Sentinel { .. }));
/// # }
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deployment {
    /// The servers.
    pub servers: Servers,
    /// Certificates for `rediss://` URLs (`None`: the system's trust store).
    pub tls: Option<TlsFiles>,
    /// After each acquisition wait until this many replicas have the lock
    /// (Redis `WAIT`), at most [`replica_timeout`](Self::replica_timeout).
    pub wait_replicas: Option<u32>,
    /// Longest replica wait (default 50 ms).
    pub replica_timeout: Duration,
    /// How wake-ups travel on a Redis Cluster (default sharded); see
    /// [`ClientBuilder::cluster_pubsub`](crate::ClientBuilder::cluster_pubsub).
    pub cluster_pubsub: ClusterPubSub,
}

/// Default of [`Deployment::replica_timeout`].
pub(crate) const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_millis(50);

/// The servers of a [`Deployment`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Servers {
    /// One server (`redis://` or `rediss://` URL).
    Single(String),
    /// A Redis Cluster, discovered from any of these seed nodes.
    Cluster(Vec<String>),
    /// The master that these Sentinels know as `master`.
    Sentinel {
        /// Sentinel URLs (`redis://HOST:26379`).
        sentinels: Vec<String>,
        /// The master's name in Sentinel.
        master: String,
    },
    /// Independent masters for [`Redlock`](crate::Redlock); each may be any of the above.
    Redlock(Vec<Servers>),
}

impl Deployment {
    /// Default of [`Deployment::replica_timeout`].
    pub const DEFAULT_REPLICA_TIMEOUT: Duration = DEFAULT_REPLICA_TIMEOUT;

    /// A deployment of these servers, without TLS files or replica waits.
    pub fn new(servers: Servers) -> Deployment {
        Deployment {
            servers,
            tls: None,
            wait_replicas: None,
            replica_timeout: DEFAULT_REPLICA_TIMEOUT,
            cluster_pubsub: ClusterPubSub::default(),
        }
    }

    /// Checks the shape: URLs present, a master name for Sentinel, nothing nested
    /// in a Redlock master, certificate with key.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        if self.wait_replicas == Some(0) {
            return Err(Error::InvalidConfig(
                "redis.wait_replicas: must be at least 1 (leave it out not to wait)".to_owned(),
            ));
        }
        match &self.servers {
            Servers::Redlock(masters) if masters.is_empty() => Err(Error::InvalidConfig(
                "redis.urls: redlock needs at least one master".to_owned(),
            )),
            Servers::Redlock(masters) => masters.iter().try_for_each(|master| match master {
                Servers::Redlock(_) => Err(Error::InvalidConfig(
                    "redis.masters: a redlock master cannot itself be redlock".to_owned(),
                )),
                other => check_servers(other),
            }),
            other => check_servers(other),
        }
    }

    /// True when the locks are Redlock locks over several masters.
    pub fn is_redlock(&self) -> bool {
        matches!(self.servers, Servers::Redlock(_))
    }

    /// Every URL named, for messages (passwords hidden).
    pub fn describe(&self) -> String {
        self.servers.label()
    }
}

impl Servers {
    /// Checks what every way of naming servers needs (a settings file, a
    /// client builder): URLs present, a master name for Sentinel.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field.
    pub(crate) fn check_shape(&self) -> Result<()> {
        match self {
            Servers::Single(url) if url.is_empty() => Err(Error::InvalidConfig(
                "redis.urls: at least one URL is needed".to_owned(),
            )),
            Servers::Cluster(nodes) if nodes.is_empty() => Err(Error::InvalidConfig(
                "redis.urls: a cluster needs at least one node URL".to_owned(),
            )),
            Servers::Sentinel { sentinels, .. } if sentinels.is_empty() => {
                Err(Error::InvalidConfig(
                    "redis.urls: sentinel needs at least one Sentinel URL".to_owned(),
                ))
            }
            Servers::Sentinel { master, .. } if master.is_empty() => Err(Error::InvalidConfig(
                "redis.master: sentinel needs the master's name".to_owned(),
            )),
            Servers::Redlock(masters) if masters.is_empty() => Err(Error::InvalidConfig(
                "redis.urls: redlock needs at least one master".to_owned(),
            )),
            _ => Ok(()),
        }
    }

    /// True when these servers are, or include, a Redis Cluster.
    #[cfg(feature = "settings-file")]
    pub(crate) fn has_cluster(&self) -> bool {
        match self {
            Servers::Cluster(_) => true,
            Servers::Redlock(masters) => masters.iter().any(Servers::has_cluster),
            Servers::Single(_) | Servers::Sentinel { .. } => false,
        }
    }

    /// The URLs, passwords hidden, e.g. `cluster redis://a:7000,redis://b:7000`.
    pub fn label(&self) -> String {
        let join = |urls: &[String]| {
            urls.iter()
                .map(|url| redact_url(url))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Servers::Single(url) => redact_url(url),
            Servers::Cluster(seeds) => format!("cluster {}", join(seeds)),
            Servers::Sentinel { sentinels, master } => {
                format!("sentinel {master} at {}", join(sentinels))
            }
            Servers::Redlock(masters) => format!(
                "redlock {}",
                masters
                    .iter()
                    .map(Servers::label)
                    .collect::<Vec<_>>()
                    .join(" + ")
            ),
        }
    }
}

fn check_servers(servers: &Servers) -> Result<()> {
    servers.check_shape()?;
    let urls = match servers {
        Servers::Single(url) => std::slice::from_ref(url),
        Servers::Cluster(seeds) => seeds.as_slice(),
        Servers::Sentinel { sentinels, .. } => sentinels.as_slice(),
        Servers::Redlock(_) => return Ok(()),
    };
    for url in urls {
        if !(url.starts_with("redis://")
            || url.starts_with("rediss://")
            || url.starts_with("redis+unix://")
            || url.starts_with("unix://"))
        {
            return Err(Error::InvalidConfig(format!(
                "redis.urls: {:?} is not a redis:// or rediss:// URL",
                redact_url(url)
            )));
        }
    }
    Ok(())
}

/// The URL with its password replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The userinfo ends at the last '@' before the path.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{}", &rest[at + 1..]),
        None if rest[..at].is_empty() => url.to_owned(),
        // `redis://password@host` is not how redis-rs reads it, but be safe.
        None => format!("{scheme}://***@{}", &rest[at + 1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_hide_passwords() {
        let servers = Servers::Redlock(vec![
            Servers::Single("redis://app:s3cret@a:1".into()),
            Servers::Cluster(vec!["redis://:pw@c:7000".into()]),
        ]);
        let label = servers.label();
        assert!(
            !label.contains("s3cret") && !label.contains("pw@"),
            "{label}"
        );
        assert_eq!(redact_url("rediss://s3cret@db/1"), "rediss://***@db/1");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}

//! One way to name where Redis runs: one server, a Cluster, a Sentinel group,
//! or independent Redlock masters, each secured by TLS if its URLs say so.
//! The settings file's `[redis]` and `[tls]` sections, the CLI's flags and
//! the shop's flags all end up here.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::tls_files::TlsFiles;

/// Where the locks live.
///
/// ```
/// use redlatch::{Deployment, Servers};
///
/// let deployment = Deployment::from_toml(r#"
///     [redis]
///     mode = "sentinel"
///     urls = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
///     master = "locks"
/// "#)?.expect("a [redis] section");
/// assert!(matches!(deployment.servers, Servers::Sentinel { .. }));
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

    /// Reads the `[redis]` and `[tls]` sections of a settings file; `None`
    /// when the file has no `[redis]` section. Other sections are left to
    /// [`Settings::from_toml`](crate::Settings::from_toml).
    ///
    /// `[redis]`: `mode = "single" | "cluster" | "sentinel" | "redlock"`
    /// (default `single`, or `redlock` when `urls` has several entries),
    /// `urls = [...]`, `master = "NAME"` (sentinel), `wait_replicas = N`,
    /// `replica_timeout = "50ms"`, `pubsub = "sharded" | "plain"` (how
    /// wake-ups travel on a cluster), and for Redlock masters that are not
    /// single servers, `[[redis.masters]]` tables with `mode`, `urls` and
    /// `master`. `[tls]`: `ca`, `cert`, `key` (PEM files).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad field, e.g. `redis.master`.
    pub fn from_toml(text: &str) -> Result<Option<Deployment>> {
        let file: DeploymentFile = toml::from_str(text)
            .map_err(|error| Error::InvalidConfig(error.to_string().trim().to_owned()))?;
        let Some(redis) = file.redis else {
            if file.tls.is_some() {
                return Err(Error::InvalidConfig(
                    "tls: a [tls] section needs a [redis] section to apply to".to_owned(),
                ));
            }
            return Ok(None);
        };
        let servers = redis.servers()?;
        let mut deployment = Deployment::new(servers);
        deployment.wait_replicas = redis.wait_replicas;
        if let Some(pubsub) = &redis.pubsub {
            deployment.cluster_pubsub = match pubsub.as_str() {
                "sharded" => ClusterPubSub::Sharded,
                "plain" => ClusterPubSub::Plain,
                other => {
                    return Err(Error::InvalidConfig(format!(
                        "redis.pubsub: {other:?} is not one of \"sharded\", \"plain\""
                    )));
                }
            };
            if !deployment.servers.has_cluster() {
                return Err(Error::InvalidConfig(
                    "redis.pubsub: only a cluster (mode = \"cluster\", or a Redlock master that is one) takes a pub/sub mode".to_owned(),
                ));
            }
        }
        if let Some(text) = &redis.replica_timeout {
            deployment.replica_timeout = humantime::parse_duration(text).map_err(|error| {
                Error::InvalidConfig(format!("redis.replica_timeout = {text:?}: {error}"))
            })?;
        }
        if let Some(tls) = file.tls {
            let files = TlsFiles {
                ca: tls.ca.map(Into::into),
                cert: tls.cert.map(Into::into),
                key: tls.key.map(Into::into),
            };
            files.validate()?;
            deployment.tls = Some(files);
        }
        deployment.validate()?;
        Ok(Some(deployment))
    }

    /// Reads a settings file (see [`from_toml`](Self::from_toml)).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the file and the bad field.
    pub fn load(path: impl AsRef<Path>) -> Result<Option<Deployment>> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::InvalidConfig(format!("{}: {error}", path.display())))?;
        Deployment::from_toml(&text).map_err(|error| match error {
            Error::InvalidConfig(reason) => {
                Error::InvalidConfig(format!("{}: {reason}", path.display()))
            }
            other => other,
        })
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
    fn has_cluster(&self) -> bool {
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

/// The file's `[redis]` and `[tls]` sections; other sections are Settings'.
#[derive(Debug, Default, Deserialize)]
struct DeploymentFile {
    redis: Option<RedisSection>,
    tls: Option<TlsSection>,
}

/// `[redis]` as written in the settings file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RedisSection {
    mode: Option<String>,
    #[serde(default)]
    urls: Vec<String>,
    master: Option<String>,
    wait_replicas: Option<u32>,
    replica_timeout: Option<String>,
    pubsub: Option<String>,
    #[serde(default)]
    masters: Vec<MasterSection>,
}

/// One `[[redis.masters]]` table of a Redlock deployment.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MasterSection {
    mode: Option<String>,
    #[serde(default)]
    urls: Vec<String>,
    master: Option<String>,
}

/// `[tls]` as written in the settings file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsSection {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

impl RedisSection {
    fn servers(&self) -> Result<Servers> {
        let default_mode = if self.urls.len() > 1 || !self.masters.is_empty() {
            "redlock"
        } else {
            "single"
        };
        let mode = self.mode.as_deref().unwrap_or(default_mode);
        if mode == "redlock" {
            let mut masters: Vec<Servers> =
                self.urls.iter().cloned().map(Servers::Single).collect();
            for (index, master) in self.masters.iter().enumerate() {
                let field = format!("redis.masters[{index}]");
                let mode = master.mode.as_deref().unwrap_or("single");
                if mode == "redlock" {
                    return Err(Error::InvalidConfig(format!(
                        "{field}.mode: a redlock master cannot itself be redlock"
                    )));
                }
                masters.push(servers_of(
                    &field,
                    mode,
                    &master.urls,
                    master.master.as_deref(),
                )?);
            }
            return Ok(Servers::Redlock(masters));
        }
        if !self.masters.is_empty() {
            return Err(Error::InvalidConfig(format!(
                "redis.masters: only mode = \"redlock\" takes masters (mode is {mode:?})"
            )));
        }
        servers_of("redis", mode, &self.urls, self.master.as_deref())
    }
}

fn servers_of(field: &str, mode: &str, urls: &[String], master: Option<&str>) -> Result<Servers> {
    if master.is_some() && mode != "sentinel" {
        return Err(Error::InvalidConfig(format!(
            "{field}.master: only mode = \"sentinel\" takes a master name"
        )));
    }
    let servers = match mode {
        "single" => match urls {
            [url] => Servers::Single(url.clone()),
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "{field}.urls: mode \"single\" takes exactly one URL, {} given",
                    urls.len()
                )));
            }
        },
        "cluster" => Servers::Cluster(urls.to_vec()),
        "sentinel" => Servers::Sentinel {
            sentinels: urls.to_vec(),
            master: master
                .ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "{field}.master: mode \"sentinel\" needs the master's name"
                    ))
                })?
                .to_owned(),
        },
        other => {
            return Err(Error::InvalidConfig(format!(
                "{field}.mode: {other:?} is not one of \"single\", \"cluster\", \"sentinel\", \"redlock\""
            )));
        }
    };
    if urls.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{field}.urls: at least one URL is needed"
        )));
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(text: &str) -> String {
        Deployment::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn every_mode_is_read() {
        let single = Deployment::from_toml("[redis]\nurls = [\"redis://a:1\"]")
            .unwrap()
            .unwrap();
        assert_eq!(single.servers, Servers::Single("redis://a:1".into()));
        let cluster = Deployment::from_toml(
            "[redis]\nmode = \"cluster\"\nurls = [\"redis://a:1\", \"redis://b:2\"]",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            cluster.servers,
            Servers::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        assert_eq!(cluster.cluster_pubsub, ClusterPubSub::Sharded);
        let plain = Deployment::from_toml(
            "[redis]\nmode = \"cluster\"\nurls = [\"redis://a:1\"]\npubsub = \"plain\"",
        )
        .unwrap()
        .unwrap();
        assert_eq!(plain.cluster_pubsub, ClusterPubSub::Plain);
        let sentinel = Deployment::from_toml(
            "[redis]\nmode = \"sentinel\"\nurls = [\"redis://s:26379\"]\nmaster = \"m\"\nwait_replicas = 1\nreplica_timeout = \"20ms\"",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            sentinel.servers,
            Servers::Sentinel {
                sentinels: vec!["redis://s:26379".into()],
                master: "m".into()
            }
        );
        assert_eq!(sentinel.wait_replicas, Some(1));
        assert_eq!(sentinel.replica_timeout, Duration::from_millis(20));
        let redlock = Deployment::from_toml(
            r#"
            [redis]
            mode = "redlock"
            urls = ["redis://a:1"]
            [[redis.masters]]
            mode = "cluster"
            urls = ["redis://c:7000"]
            [tls]
            ca = "ca.pem"
            "#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            redlock.servers,
            Servers::Redlock(vec![
                Servers::Single("redis://a:1".into()),
                Servers::Cluster(vec!["redis://c:7000".into()])
            ])
        );
        assert_eq!(redlock.tls.unwrap().ca, Some("ca.pem".into()));
        assert_eq!(
            Deployment::from_toml("[lock]\nkey_prefix = \"p\"").unwrap(),
            None
        );
    }

    #[test]
    fn errors_name_the_bad_field() {
        assert!(bad("[redis]\nmode = \"galaxy\"\nurls = [\"redis://a\"]").contains("redis.mode"));
        assert!(
            bad("[redis]\nmode = \"sentinel\"\nurls = [\"redis://a\"]").contains("redis.master")
        );
        assert!(bad("[redis]\nmode = \"cluster\"").contains("redis.urls"));
        assert!(bad("[redis]\nurls = [\"http://a\"]").contains("redis.urls"));
        assert!(bad("[redis]\nurls = [\"redis://a\"]\nmaster = \"m\"").contains("redis.master"));
        assert!(bad("[redis]\nurlz = []").contains("urlz"));
        assert!(
            bad("[redis]\nmode = \"cluster\"\nurls = [\"redis://a\"]\npubsub = \"loud\"")
                .contains("redis.pubsub")
        );
        assert!(
            bad("[redis]\nurls = [\"redis://a\"]\npubsub = \"plain\"").contains("redis.pubsub")
        );
        assert!(
            bad("[redis]\nurls = [\"redis://a\"]\n[tls]\ncert = \"c.pem\"").contains("tls.key")
        );
        assert!(
            bad("[redis]\nurls = [\"redis://a\"]\nwait_replicas = 0")
                .contains("redis.wait_replicas")
        );
        assert!(
            bad("[redis]\nmode = \"redlock\"\n[[redis.masters]]\nmode = \"sentinel\"\nurls = [\"redis://s\"]")
                .contains("redis.masters[0].master")
        );
        assert!(bad("[tls]\nca = \"x\"").contains("tls"));
    }

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

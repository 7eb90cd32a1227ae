//! A settings file's `[redis]` and `[tls]` sections read into a
//! [`Deployment`] (the `settings-file` feature).

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::deployment::{Deployment, Servers};
use crate::settings::tls_files::TlsFiles;

impl Deployment {
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
    #[cfg_attr(docsrs, doc(cfg(feature = "settings-file")))]
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
    #[cfg_attr(docsrs, doc(cfg(feature = "settings-file")))]
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
    use std::time::Duration;

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
}

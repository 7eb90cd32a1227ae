//! Connecting a [`Deployment`]: the settings file's description of the
//! servers turned into a client builder. (Redlock deployments connect in
//! `redlock/deployment.rs`.)

use crate::client::Client;
use crate::client::builder::ClientBuilder;
use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::settings::deployment::{Deployment, Servers};

impl Deployment {
    /// A client builder for this deployment, with `settings`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a Redlock deployment (use
    /// [`connect_redlock`](Self::connect_redlock)) or a bad shape.
    pub fn builder(&self, settings: Settings) -> Result<ClientBuilder> {
        self.validate()?;
        if self.is_redlock() {
            return Err(Error::InvalidConfig(
                "redis.mode: a redlock deployment has several masters; connect it as Redlock"
                    .to_owned(),
            ));
        }
        Ok(self.builder_for(&self.servers, settings))
    }

    /// Connects a client (not Redlock; see [`builder`](Self::builder)).
    ///
    /// # Errors
    /// As [`builder`](Self::builder) and [`ClientBuilder::connect`].
    pub async fn connect(&self, settings: Settings) -> Result<Client> {
        self.builder(settings)?.connect().await
    }

    /// A builder for one set of servers of this deployment: the whole of a
    /// deployment that is not Redlock, or one Redlock master.
    pub(crate) fn builder_for(&self, servers: &Servers, settings: Settings) -> ClientBuilder {
        let mut builder = match servers {
            Servers::Single(url) => Client::builder(url),
            Servers::Cluster(seeds) => ClientBuilder::cluster(seeds.clone()),
            Servers::Sentinel { sentinels, master } => {
                ClientBuilder::sentinel(sentinels.clone(), master)
            }
            // Refused by validate and builder.
            Servers::Redlock(_) => Client::builder(""),
        }
        .settings(settings);
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.clone());
        }
        if let Some(replicas) = self.wait_replicas {
            builder = builder.wait_for_replicas(replicas, self.replica_timeout);
        }
        builder.cluster_pubsub(self.cluster_pubsub)
    }
}

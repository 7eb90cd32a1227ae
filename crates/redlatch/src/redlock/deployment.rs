//! Connecting a Redlock [`Deployment`]: every master, as a client.

use crate::error::{Error, Result};
use crate::redlock::Redlock;
use crate::settings::Settings;
use crate::settings::deployment::{Deployment, Servers};

impl Deployment {
    /// Connects every master of a Redlock deployment (any deployment: one
    /// that is not Redlock becomes Redlock over its one master).
    ///
    /// When every master is one server named by URL and no TLS files or
    /// replica waits are set, masters that cannot be reached now are kept as
    /// failed nodes, as [`Redlock::connect_with`] does; otherwise every
    /// master must connect.
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`](crate::ClientBuilder::connect) for each
    /// master, and [`Redlock::new`].
    pub async fn connect_redlock(&self, settings: Settings) -> Result<Redlock> {
        self.validate()?;
        let masters = match &self.servers {
            Servers::Redlock(masters) => masters.clone(),
            other => vec![other.clone()],
        };
        let urls: Vec<&String> = masters
            .iter()
            .filter_map(|master| match master {
                Servers::Single(url) => Some(url),
                _ => None,
            })
            .collect();
        if urls.len() == masters.len() && self.tls.is_none() && self.wait_replicas.is_none() {
            return Redlock::connect_with(&urls, settings).await;
        }
        let connecting = masters.iter().map(|master| {
            let builder = self.builder_for(master, settings.clone());
            async move { Ok::<_, Error>((master.label(), builder.connect().await?)) }
        });
        let clients = futures_util::future::try_join_all(connecting).await?;
        Redlock::with_labels(clients)
    }
}

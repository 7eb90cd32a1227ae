//! Connecting a Redlock [`Deployment`]: every master, as a client.

use crate::error::Result;
use crate::redlock::Redlock;
use crate::settings::Settings;
use crate::settings::deployment::{Deployment, Servers};

impl Deployment {
    /// Connects every master of a Redlock deployment (any deployment: one
    /// that is not Redlock becomes Redlock over its one master), each with
    /// its builder, as [`Redlock::connect_with`] does: masters that cannot
    /// be reached now are kept as failed nodes.
    ///
    /// # Errors
    /// As [`Redlock::connect_with`].
    pub async fn connect_redlock(&self, settings: Settings) -> Result<Redlock> {
        self.validate()?;
        let masters = match &self.servers {
            Servers::Redlock(masters) => masters.clone(),
            other => vec![other.clone()],
        };
        let builders: Vec<_> = masters
            .iter()
            .map(|master| self.builder_for(master, settings.clone()))
            .collect();
        Redlock::connect_with(builders).await
    }
}

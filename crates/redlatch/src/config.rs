//! The builder that checks a client's settings and connects.

use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::settings::Settings;

/// Builds a [`Client`] with settings other than the defaults.
///
/// The URL carries the address, database, password and ACL user, as redis-rs
/// reads it: `redis://[USER][:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://` for TLS
/// when redis-rs is built with TLS support. Everything else is a [`Settings`]
/// field, which a running client can change.
///
/// ```no_run
/// # async fn demo() -> redlatch::Result<()> {
/// use std::time::Duration;
///
/// let client = redlatch::Client::builder("redis://app:secret@127.0.0.1:6379/0")
///     .connect_timeout(Duration::from_secs(2))
///     .response_timeout(Duration::from_millis(500))
///     .retries(5)
///     .key_prefix("shop:")
///     .default_lease(Duration::from_secs(10))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until .connect() is awaited"]
pub struct ClientBuilder {
    pub(crate) url: String,
    pub(crate) settings: Settings,
}

impl ClientBuilder {
    pub(crate) fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            url: url.to_owned(),
            settings: Settings::default(),
        }
    }

    /// Replaces all settings at once (for example from [`Settings::load`]);
    /// the other builder methods change one field.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Time allowed to open a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// Time allowed for Redis to answer a call (default 3 s). A call that
    /// waits longer fails with [`Error::ResponseTimeout`](crate::Error::ResponseTimeout).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.settings.response_timeout = timeout;
        self
    }

    /// Retries after a connection error (default 3); see [`RetryPolicy`](crate::RetryPolicy).
    pub fn retries(mut self, retries: u32) -> Self {
        self.settings.retry.attempts = retries;
        self
    }

    /// Delay before the first retry (default 100 ms); it doubles at each
    /// retry, up to the policy's `max_delay` (2 s).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.settings.retry.base_delay = delay;
        self.settings.retry.max_delay = self.settings.retry.max_delay.max(delay);
        self
    }

    /// Prefix added to every lock name to form its key (default none).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.key_prefix = prefix.into();
        self
    }

    /// Lease of locks renewed by the watchdog (default 30 s, at least 30 ms).
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.settings.default_lease = lease;
        self
    }

    /// Checks the settings and connects.
    ///
    /// Costs one connection for commands (opened now) and one for
    /// subscriptions (opened in the background, reconnected as needed).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) or
    /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) for bad settings,
    /// [`Error::Unavailable`](crate::Error::Unavailable) /
    /// [`Error::ResponseTimeout`](crate::Error::ResponseTimeout) when Redis cannot be
    /// reached, [`Error::Redis`](crate::Error::Redis) when it refuses the credentials.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the connection attempt; nothing is left behind.
    pub async fn connect(self) -> Result<Client> {
        self.settings.validate()?;
        Client::open(self.url, self.settings).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn bad_settings_are_refused_before_connecting() {
        let check = |builder: ClientBuilder| builder.settings.validate();
        let zero_timeout = ClientBuilder::new("redis://127.0.0.1").connect_timeout(Duration::ZERO);
        assert!(matches!(
            check(zero_timeout),
            Err(Error::InvalidDuration {
                what: "connect timeout",
                ..
            })
        ));
        let short_lease =
            ClientBuilder::new("redis://127.0.0.1").default_lease(Duration::from_millis(5));
        assert!(matches!(
            check(short_lease),
            Err(Error::InvalidDuration {
                what: "default lease",
                ..
            })
        ));
        let many_retries = ClientBuilder::new("redis://127.0.0.1").retries(1000);
        assert!(matches!(check(many_retries), Err(Error::InvalidConfig(_))));
        assert!(check(ClientBuilder::new("redis://127.0.0.1")).is_ok());
    }
}

//! Client settings and the builder that checks them.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lease;

/// Default lease of a lock renewed by the watchdog (Redisson's `lockWatchdogTimeout`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default time allowed to open a connection (Redisson's `connectTimeout`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time allowed for an answer (Redisson's `timeout`, Jedis's `soTimeout`).
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of reconnection attempts (Redisson's `retryAttempts`).
pub const DEFAULT_RETRIES: usize = 3;
/// Default delay before the first reconnection attempt; it doubles each time, up to 2 s.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// The settings that locks read when they are created or acquired.
///
/// They can be replaced on a running client with
/// [`Client::update_settings`]; locks already held keep the lease they were
/// acquired with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSettings {
    /// Lease of locks renewed by the watchdog (default 30 s). The watchdog
    /// renews at a third of it; a crashed holder blocks others for at most this long.
    pub default_lease: Duration,
    /// Prepended to every lock name to form its Redis key (default empty).
    pub key_prefix: String,
}

impl Default for LockSettings {
    fn default() -> Self {
        LockSettings {
            default_lease: DEFAULT_LEASE,
            key_prefix: String::new(),
        }
    }
}

impl LockSettings {
    /// Checks the settings, as [`Client::update_settings`] does before applying them.
    pub fn validate(&self) -> Result<()> {
        lease::watchdog_lease_millis("default lease", self.default_lease)?;
        if self.key_prefix.len() > crate::MAX_NAME_LEN / 2 {
            return Err(Error::InvalidConfig(format!(
                "key prefix is {} bytes long; at most {} allowed",
                self.key_prefix.len(),
                crate::MAX_NAME_LEN / 2
            )));
        }
        Ok(())
    }
}

/// Connection settings, fixed for the life of a client.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionSettings {
    pub(crate) url: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) retries: usize,
    pub(crate) retry_delay: Duration,
}

/// Builds a [`Client`] with settings other than the defaults.
///
/// The URL carries the address, database, password and ACL user, as redis-rs
/// reads it: `redis://[USER][:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://` for TLS
/// when redis-rs is built with TLS support.
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
    connection: ConnectionSettings,
    locks: LockSettings,
}

impl ClientBuilder {
    pub(crate) fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            connection: ConnectionSettings {
                url: url.to_owned(),
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                response_timeout: DEFAULT_RESPONSE_TIMEOUT,
                retries: DEFAULT_RETRIES,
                retry_delay: DEFAULT_RETRY_DELAY,
            },
            locks: LockSettings::default(),
        }
    }

    /// Time allowed to open a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connection.connect_timeout = timeout;
        self
    }

    /// Time allowed for Redis to answer a command (default 3 s). A call that
    /// waits longer fails with [`Error::ResponseTimeout`].
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.connection.response_timeout = timeout;
        self
    }

    /// Reconnection attempts before a call gives up with
    /// [`Error::Unavailable`] (default 3). Calls whose effect is unknown after
    /// a broken connection (acquire, release) are never re-sent blindly.
    pub fn retries(mut self, retries: usize) -> Self {
        self.connection.retries = retries;
        self
    }

    /// Delay before the first reconnection attempt (default 100 ms); it
    /// doubles at each attempt, up to 2 s.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.connection.retry_delay = delay;
        self
    }

    /// Prefix added to every lock name to form its key (default none).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.locks.key_prefix = prefix.into();
        self
    }

    /// Lease of locks renewed by the watchdog (default 30 s, at least 30 ms).
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.locks.default_lease = lease;
        self
    }

    /// Replaces all lock settings at once.
    pub fn lock_settings(mut self, settings: LockSettings) -> Self {
        self.locks = settings;
        self
    }

    /// Checks the settings and connects.
    ///
    /// Costs one connection for commands (opened now) and one for
    /// subscriptions (opened in the background, reconnected as needed).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] or [`Error::InvalidDuration`] for bad settings,
    /// [`Error::Unavailable`] / [`Error::ResponseTimeout`] when Redis cannot be
    /// reached, [`Error::Redis`] when it refuses the credentials.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the connection attempt; nothing is left behind.
    pub async fn connect(self) -> Result<Client> {
        self.validate()?;
        Client::open(self.connection, self.locks).await
    }

    fn validate(&self) -> Result<()> {
        let connection = &self.connection;
        for (what, value) in [
            ("connect timeout", connection.connect_timeout),
            ("response timeout", connection.response_timeout),
        ] {
            if value < Duration::from_millis(1) || value > Duration::from_secs(3600) {
                return Err(Error::InvalidDuration {
                    what,
                    value,
                    reason: "must be between 1 ms and 1 hour",
                });
            }
        }
        if connection.retry_delay > Duration::from_secs(60) {
            return Err(Error::InvalidDuration {
                what: "retry delay",
                value: connection.retry_delay,
                reason: "must be at most 60 s",
            });
        }
        if connection.retries > 100 {
            return Err(Error::InvalidConfig(format!(
                "retries is {}; at most 100 allowed",
                connection.retries
            )));
        }
        self.locks.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_before_connecting() {
        let zero_timeout = ClientBuilder::new("redis://127.0.0.1").connect_timeout(Duration::ZERO);
        assert!(matches!(
            zero_timeout.validate(),
            Err(Error::InvalidDuration {
                what: "connect timeout",
                ..
            })
        ));
        let short_lease =
            ClientBuilder::new("redis://127.0.0.1").default_lease(Duration::from_millis(5));
        assert!(matches!(
            short_lease.validate(),
            Err(Error::InvalidDuration {
                what: "default lease",
                ..
            })
        ));
        let many_retries = ClientBuilder::new("redis://127.0.0.1").retries(1000);
        assert!(matches!(
            many_retries.validate(),
            Err(Error::InvalidConfig(_))
        ));
        assert!(ClientBuilder::new("redis://127.0.0.1").validate().is_ok());
    }
}

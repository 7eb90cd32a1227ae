//! The settings a running client can change: leases, waits, retries,
//! timeouts, key prefix. Read from code or from a TOML file.

use std::sync::Arc;
use std::time::Duration;

use crate::sync::unpoisoned::RwLock;

use crate::error::{Error, Result};

pub(crate) mod cluster_pubsub;
pub(crate) mod deployment;
#[cfg(feature = "settings-file")]
mod deployment_file;
#[cfg(feature = "settings-file")]
mod file;
#[cfg(feature = "clap")]
pub(crate) mod flags;
pub(crate) mod limits;
pub(crate) mod tls_files;
#[cfg(feature = "watch")]
pub(crate) mod watch;

/// What changes the settings of a running client: `Client::update_settings`
/// and a settings file's watcher. Held weakly by the watcher, so it does not
/// keep a dropped client alive.
pub(crate) trait ApplySettings: Send + Sync {
    /// Replaces the settings in force, as `Client::update_settings`.
    fn apply_settings(&self, settings: Settings) -> Result<()>;
}

/// Default of [`Settings::handoff_grace`]: how
/// long the releasing client leaves a woken waiter elsewhere to take the lock,
/// a few loopback or LAN hand-offs (message delivery plus one attempt).
pub(crate) const HANDOFF_GRACE: Duration = Duration::from_millis(5);

/// Default lease of a lock renewed by the watchdog (Redisson's `lockWatchdogTimeout`).
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default of [`Settings::fair_lock_wait_timeout`]: Redisson's
/// `fairLockWaitTimeout` (5 minutes).
pub(crate) const FAIR_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default time allowed to open a connection (Redisson's `connectTimeout`).
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time allowed for an answer (Redisson's `timeout`, Jedis's `soTimeout`).
pub(crate) const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of retries after a connection error (Redisson's `retryAttempts`).
pub(crate) const DEFAULT_RETRIES: u32 = 3;
/// Default delay before the first retry; it doubles each time, up to [`DEFAULT_MAX_RETRY_DELAY`].
pub(crate) const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// Default longest delay between retries.
pub(crate) const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(2);

/// How calls retry after a connection error.
///
/// Only calls that are safe to repeat are retried: acquires by anonymous
/// owners (each attempt has its own owner, and an attempt whose outcome is
/// unknown is given back), status reads, and renewals. Acquires by named
/// owners and releases are never re-sent blindly. On a Redis Cluster a
/// request that failed on the way is sent again as the same request, up to
/// `attempts` times (at least once), to learn its outcome: a request record
/// makes it run once however often it is sent (`docs/REDIS-DATA.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first try (default 3).
    pub attempts: u32,
    /// Delay before the first retry (default 100 ms); doubles each time.
    pub base_delay: Duration,
    /// Longest delay between retries (default 2 s).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: DEFAULT_RETRIES,
            base_delay: DEFAULT_RETRY_DELAY,
            max_delay: DEFAULT_MAX_RETRY_DELAY,
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (0 for the first retry).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(31));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// Settings a client reads at each call, so they can change while it runs
/// ([`Client::update_settings`](crate::Client::update_settings),
/// and, with the `watch` feature, `Client::watch_settings`).
///
/// Construct with `Settings::default()` and change fields, or load a file
/// with `Settings::load` (the `settings-file` feature).
///
/// ```
/// let mut settings = redlatch::Settings::default();
/// settings.default_lease = std::time::Duration::from_secs(10);
/// settings.key_prefix = "shop:".into();
/// assert!(settings.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Lease of locks renewed by the watchdog (default 30 s, at least 30 ms).
    /// A change also applies to locks already held, at their next renewal
    /// (which the change brings forward).
    pub default_lease: Duration,
    /// Prepended to every lock name to form its key (default none). Applies
    /// to acquisitions that start after the change.
    pub key_prefix: String,
    /// How long an `acquire()` of any handle waits ([`Lock::acquire`](crate::Lock::acquire),
    /// the other primitives', Redlock's) before [`Error::Timeout`](crate::Error::Timeout)
    /// (or `NoPermits`); `None` (default) waits until the lock is free.
    /// `try_acquire` and `acquire_within` say their own wait.
    pub wait_timeout: Option<Duration>,
    /// Retries after connection errors.
    pub retry: RetryPolicy,
    /// Time allowed to open a connection (default 10 s). The command
    /// connection reads it when the client connects; the subscription
    /// connection at each reconnect. Connecting to one server gets it in
    /// all, retries included, then fails with
    /// [`Error::ConnectTimeout`](crate::Error::ConnectTimeout); a cluster or
    /// a Sentinel group, which may try several nodes, gets it for each
    /// attempt and its retries.
    pub connect_timeout: Duration,
    /// Time allowed for Redis to answer one call (default 3 s); read at each call.
    pub response_timeout: Duration,
    /// After a release that woke waiters in other processes, this client's
    /// next acquire of the same lock steps aside for up to this long, so a
    /// woken waiter elsewhere gets its turn (default 5 ms; zero turns the
    /// courtesy off and lets a releaser take the lock straight back). It
    /// stops early once another client has the lock, or once the lock has
    /// stayed free for a tenth of this (nobody is coming). Set it to about
    /// ten hand-offs between your processes.
    pub handoff_grace: Duration,
    /// The fair lock's wait time W, Redisson's `fairLockWaitTimeout`
    /// (default 5 minutes, the same as Redisson's so both sides date places
    /// alike): a waiter's place in line is dated W after the one before it,
    /// and the first waiter is dropped once its date passes (see
    /// [`FairLock`](crate::FairLock)). An acquire with a timeout uses its
    /// timeout instead, as Redisson's `tryLock(waitTime, …)` does.
    pub fair_lock_wait_timeout: Duration,
    /// Keep one fencing counter per lock name, `redisson_lock_token:{KEY}`,
    /// as Redisson's `RFencedLock` does (default off). Off, every lock of a
    /// server (of a hash slot, on a cluster) takes its tokens from one shared
    /// counter, `redlatch_lock_token`, and no key is left behind per name;
    /// turn it on only where Redisson's `RFencedLock` locks the same names
    /// and both sides' tokens must be ordered. Applies to acquisitions that
    /// start after the change. Before switching it on a server that has
    /// counters of the other kind, delete the counters of the kind switched
    /// to (they start again from the server's clock, above every token):
    /// `docs/SAFETY.md`, "Fencing tokens".
    pub per_name_token_counters: bool,
    /// Publish the unlock message on every last release of a reentrant
    /// lock, as Redisson's clients expect (default off). Off, a release
    /// publishes only when a redlatch waiter marked the hold it ends (one
    /// Redis command fewer per uncontended cycle); a Redisson client
    /// waiting on the same name does not mark, and would then wait for the
    /// holder's lease to end. Turn it on where Redisson's `RLock` waits on
    /// the same names.
    pub redisson_waiters: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_lease: DEFAULT_LEASE,
            key_prefix: String::new(),
            wait_timeout: None,
            retry: RetryPolicy::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            handoff_grace: HANDOFF_GRACE,
            fair_lock_wait_timeout: FAIR_LOCK_WAIT_TIMEOUT,
            per_name_token_counters: false,
            redisson_waiters: false,
        }
    }
}

impl Settings {
    /// Default lease of a lock renewed by the watchdog (Redisson's `lockWatchdogTimeout`).
    pub const DEFAULT_LEASE: Duration = DEFAULT_LEASE;
    /// Default of [`Settings::handoff_grace`]: how
    /// long the releasing client leaves a woken waiter elsewhere to take the lock,
    /// a few loopback or LAN hand-offs (message delivery plus one attempt).
    pub const HANDOFF_GRACE: Duration = HANDOFF_GRACE;
    /// Default of [`Settings::fair_lock_wait_timeout`]: Redisson's
    /// `fairLockWaitTimeout` (5 minutes).
    pub const FAIR_LOCK_WAIT_TIMEOUT: Duration = FAIR_LOCK_WAIT_TIMEOUT;
    /// Default time allowed to open a connection (Redisson's `connectTimeout`).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;
    /// Default time allowed for an answer (Redisson's `timeout`, Jedis's `soTimeout`).
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = DEFAULT_RESPONSE_TIMEOUT;
    /// Default number of retries after a connection error (Redisson's `retryAttempts`).
    pub const DEFAULT_RETRIES: u32 = DEFAULT_RETRIES;
    /// Default delay before the first retry; it doubles each time, up to [`Settings::DEFAULT_MAX_RETRY_DELAY`].
    pub const DEFAULT_RETRY_DELAY: Duration = DEFAULT_RETRY_DELAY;
    /// Default longest delay between retries.
    pub const DEFAULT_MAX_RETRY_DELAY: Duration = DEFAULT_MAX_RETRY_DELAY;
    /// Longest lock name accepted, in bytes, key prefix included.
    ///
    /// Redis would take far longer keys, but a name this long is almost always a
    /// bug (a request body used as a name), and every script call carries it.
    pub const MAX_NAME_LEN: usize = limits::MAX_NAME_LEN;
    /// Longest owner name accepted by [`Lock::with_owner`](crate::Lock::with_owner), in bytes.
    pub const MAX_OWNER_LEN: usize = limits::MAX_OWNER_LEN;
    /// Shortest lease accepted: Redis expiries have millisecond resolution.
    pub const MIN_LEASE: Duration = limits::MIN_LEASE;
    /// Shortest lease the watchdog will renew: it renews at a third of the
    /// lease, and below this the renewals would be more traffic than work.
    pub const MIN_WATCHDOG_LEASE: Duration = limits::MIN_WATCHDOG_LEASE;
    /// Longest lease accepted (30 days). Longer is a unit mistake, not a lease:
    /// a crashed holder would block everyone for that long.
    pub const MAX_LEASE: Duration = limits::MAX_LEASE;

    /// Checks every field; the same check guards every way settings change.
    ///
    /// # Errors
    /// [`Error::InvalidDuration`] or [`Error::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<()> {
        limits::watchdog_lease_millis("default lease", self.default_lease)?;
        limits::lease_millis("fair lock wait timeout", self.fair_lock_wait_timeout)?;
        if self.key_prefix.len() > limits::MAX_NAME_LEN / 2 {
            return Err(Error::InvalidConfig(format!(
                "key prefix is {} bytes long; at most {} allowed",
                self.key_prefix.len(),
                limits::MAX_NAME_LEN / 2
            )));
        }
        for (what, value) in [
            ("connect timeout", self.connect_timeout),
            ("response timeout", self.response_timeout),
        ] {
            if value < Duration::from_millis(1) || value > Duration::from_secs(3600) {
                return Err(Error::InvalidDuration {
                    what,
                    value,
                    reason: "must be between 1 ms and 1 hour",
                });
            }
        }
        if let Some(wait) = self.wait_timeout
            && wait > limits::MAX_LEASE
        {
            return Err(Error::InvalidDuration {
                what: "wait timeout",
                value: wait,
                reason: "must be at most 30 days (leave it out to wait forever)",
            });
        }
        if self.handoff_grace > Duration::from_secs(1) {
            return Err(Error::InvalidDuration {
                what: "hand-off grace",
                value: self.handoff_grace,
                reason: "must be at most 1 s",
            });
        }
        if self.retry.attempts > 100 {
            return Err(Error::InvalidConfig(format!(
                "retry attempts is {}; at most 100 allowed",
                self.retry.attempts
            )));
        }
        if self.retry.max_delay > Duration::from_secs(60)
            || self.retry.base_delay > self.retry.max_delay
        {
            return Err(Error::InvalidDuration {
                what: "retry delay",
                value: self.retry.base_delay,
                reason: "base delay must not exceed max delay, and max delay must be at most 60 s",
            });
        }
        Ok(())
    }
}

/// The settings shared by a client and its background tasks.
pub(crate) type SharedSettings = Arc<RwLock<Arc<Settings>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(0), Duration::from_millis(100));
        assert_eq!(policy.delay(1), Duration::from_millis(200));
        assert_eq!(policy.delay(10), DEFAULT_MAX_RETRY_DELAY);
        assert_eq!(policy.delay(u32::MAX), DEFAULT_MAX_RETRY_DELAY);
    }
}

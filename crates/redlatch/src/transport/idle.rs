//! Connections the server closes when idle (`timeout N` in redis.conf;
//! managed services often set it). The client learns of such a close only
//! when it writes to the connection: a call sent then fails with its outcome
//! unknown, and may not be sent again (a reentrant acquire or a release
//! would count twice). So a call on a connection idle for long enough sends
//! a `PING` first, which is safe to send again: if the connection was
//! closed, the PING fails, the connection is replaced, and the call goes on
//! the new one. Cost per call: a clock read and a few relaxed atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;

/// How long a connection may idle before a PING goes first, when the server
/// would not tell its `timeout` (`CONFIG GET` refused): longer than nothing,
/// shorter than the idle timeouts managed services set (300 s and more).
pub(crate) const UNKNOWN_TIMEOUT_PING_AFTER: Duration = Duration::from_secs(60);

/// Never: the server keeps idle connections (`timeout 0`, Redis's default).
const NEVER: u64 = u64::MAX;

/// When a connection was last used, and how long it may idle before a call
/// on it sends a PING first. Shared by the clones of one connection.
#[derive(Debug)]
pub(crate) struct IdleCheck {
    /// The origin of the instants below.
    since: Instant,
    /// Milliseconds from `since` to when the last call was sent on a
    /// connection not idle, or a PING answered: never later than the last
    /// reply, so the idle time is never under-estimated.
    last_used: AtomicU64,
    /// Idle milliseconds after which a PING goes first ([`NEVER`]: none).
    ping_after: AtomicU64,
}

impl Default for IdleCheck {
    /// Until the server's `timeout` is known: [`UNKNOWN_TIMEOUT_PING_AFTER`].
    fn default() -> IdleCheck {
        let check = IdleCheck {
            since: Instant::now(),
            last_used: AtomicU64::new(0),
            ping_after: AtomicU64::new(NEVER),
        };
        check.server_timeout(None);
        check
    }
}

impl IdleCheck {
    /// Takes the server's idle `timeout` (`None`: unknown): a PING goes
    /// first after half of it, so the server's own check (about ten times a
    /// second, rounded to its seconds) cannot close the connection between
    /// the PING and the call; nothing when it is zero.
    pub(crate) fn server_timeout(&self, timeout: Option<Duration>) {
        let after = match timeout {
            None => UNKNOWN_TIMEOUT_PING_AFTER.as_millis() as u64,
            Some(timeout) if timeout.is_zero() => NEVER,
            Some(timeout) => (timeout / 2).as_millis() as u64,
        };
        self.ping_after.store(after, Ordering::Relaxed);
    }

    /// Notes a call sent now; true when the connection idled long enough
    /// that the call must send a PING first. Until a PING has been answered
    /// ([`IdleCheck::answered`]), every call sent meanwhile sends its own:
    /// none goes on the connection the first PING may find closed.
    pub(crate) fn used_now(&self) -> bool {
        let after = self.ping_after.load(Ordering::Relaxed);
        if after == NEVER {
            return false;
        }
        let now = self.since.elapsed().as_millis() as u64;
        if now.saturating_sub(self.last_used.load(Ordering::Relaxed)) > after {
            return true;
        }
        self.last_used.fetch_max(now, Ordering::Relaxed);
        false
    }

    /// Notes a PING answered (or failed, the connection replaced) now.
    pub(crate) fn answered(&self) {
        let now = self.since.elapsed().as_millis() as u64;
        self.last_used.fetch_max(now, Ordering::Relaxed);
    }
}

/// Sends a PING on `conn`, whose failure lets the connection replace a
/// closed socket; its outcome does not matter to the call that follows.
pub(crate) async fn ping(conn: &mut impl ConnectionLike) {
    let _ = redis::cmd("PING").query_async::<redis::Value>(conn).await;
}

/// The server's idle `timeout` (`CONFIG GET timeout`); `None` when it would
/// not say (an ACL, a renamed `CONFIG`, a managed service).
pub(crate) async fn server_timeout(conn: &mut impl ConnectionLike) -> Option<Duration> {
    let reply: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("timeout")
        .query_async(conn)
        .await
        .ok()?;
    let seconds: u64 = reply.get(1)?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_goes_first_after_half_the_timeout_and_never_at_zero() {
        let check = IdleCheck::default();
        check.server_timeout(Some(Duration::ZERO));
        check.last_used.store(0, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!check.used_now(), "timeout 0 keeps idle connections");
        check.server_timeout(Some(Duration::from_millis(40)));
        check.last_used.store(0, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert!(check.used_now(), "idle 30 ms past half of 40 ms");
        assert!(check.used_now(), "no PING answered yet");
        check.answered();
        assert!(!check.used_now(), "just answered");
        check.server_timeout(None);
        assert_eq!(
            check.ping_after.load(Ordering::Relaxed),
            UNKNOWN_TIMEOUT_PING_AFTER.as_millis() as u64
        );
    }
}

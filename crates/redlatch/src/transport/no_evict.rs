//! `CLIENT NO-EVICT ON` (Redis and Valkey 7 and later): a server that
//! bounds its clients' memory (`maxmemory-clients`) closes the largest
//! clients first when the bound is passed. A lock client's connections are
//! small but must not be among them: a closed command connection fails the
//! renewals in flight, a closed watch connection leaves lost holds to the
//! renewals. The flag belongs to one connection and dies with it, so it is
//! sent on each connection the client opens, and again after a reconnection
//! ([`Keeper`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::RedisError;
use redis::aio::ConnectionLike;
use tracing::debug;

use crate::transport::capabilities::Support;

/// Asks the server not to evict the connection `conn` is (or, for a
/// multiplexed connection, now runs on). What the server answered.
pub(crate) async fn protect(conn: &mut impl ConnectionLike) -> Support {
    match ask(conn).await {
        Ok(()) => Support::Available,
        Err(error) => judge(&error),
    }
}

async fn ask(conn: &mut impl ConnectionLike) -> redis::RedisResult<()> {
    redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("ON")
        .query_async::<()>(conn)
        .await
}

/// How long a protection sent after a reconnection may take.
const PROTECT_LIMIT: Duration = Duration::from_secs(3);

/// Keeps a reconnecting connection unevictable: a call that failed on the
/// connection itself (it broke, or could not be made) means the calls that
/// follow may run on a new connection, without the flag; the first of them
/// sends it again, from a task of its own. Whatever the calls are (short
/// holds never renewed included), and at most one protection at a time. A
/// server that answers no (an ACL changed, a failover to a server set up
/// otherwise) is not asked again: the flag is no longer kept.
#[derive(Debug, Default)]
pub(crate) struct Keeper {
    /// The server granted the flag at connect: keep it.
    wanted: AtomicBool,
    /// A call failed on the connection since the flag was last set.
    unsure: AtomicBool,
    /// A protection is under way.
    sending: AtomicBool,
}

impl Keeper {
    /// The flag was granted: keep it from now on.
    pub(crate) fn keep(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }

    /// True when calls must be watched for broken connections.
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Notes how a call ended.
    pub(crate) fn note<T>(&self, outcome: &redis::RedisResult<T>) {
        if let Err(error) = outcome
            && (error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.is_timeout())
        {
            self.unsure.store(true, Ordering::Relaxed);
        }
    }

    /// Before a call on `conn`: sends the flag again, in the background, if
    /// the connection may have been replaced since it was last set.
    pub(crate) fn renew_if_unsure<C>(self: &std::sync::Arc<Self>, conn: &C)
    where
        C: ConnectionLike + Clone + Send + 'static,
    {
        if !self.unsure.load(Ordering::Relaxed) || self.sending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sending.store(false, Ordering::Release);
            return;
        };
        self.unsure.store(false, Ordering::Relaxed);
        let (keeper, mut conn) = (self.clone(), conn.clone());
        runtime.spawn(async move {
            match tokio::time::timeout(PROTECT_LIMIT, ask(&mut conn)).await {
                Ok(Ok(())) => {}
                // Refused: asked again, it would be refused on every call.
                Ok(Err(error)) if refused(&error) => {
                    debug!(%error, "redlatch: the server no longer makes this client unevictable");
                    keeper.wanted.store(false, Ordering::Relaxed);
                }
                // Not set (the connection broke again): the next call tries.
                _ => keeper.unsure.store(true, Ordering::Relaxed),
            }
            keeper.sending.store(false, Ordering::Release);
        });
    }
}

/// The server refuses the command itself (an ACL, a server that does not
/// know it or renamed `CLIENT`): asked again, it would refuse again. Any
/// other answer (a server full, loading, busy) may pass: the next call asks.
fn refused(error: &RedisError) -> bool {
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    match error.code() {
        Some("NOPERM") => true,
        Some("ERR") => detail.contains("unknown command") || detail.contains("unknown subcommand"),
        _ => false,
    }
}

/// An older server does not know the subcommand; a renamed or disabled
/// `CLIENT`, or an ACL, refuses it.
fn judge(error: &RedisError) -> Support {
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    match error.code() {
        Some("ERR") if detail.contains("unknown subcommand") || detail.contains("syntax") => {
            Support::Absent
        }
        Some(code) => Support::Denied(format!("{code} {}", error.detail().unwrap_or_default())),
        // No answer (a broken connection, a timeout): nothing learned.
        None => Support::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str, detail: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{code} {detail}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(error)) => error.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn only_a_refusal_of_the_command_stops_the_keeper_asking() {
        let acl = server_error(
            "NOPERM",
            "User default has no permissions to run the 'client|no-evict' command",
        );
        assert!(refused(&acl));
        let old = server_error("ERR", "unknown subcommand 'NO-EVICT'. Try CLIENT HELP.");
        assert!(refused(&old));
        let full = server_error("ERR", "max number of clients reached");
        assert!(!refused(&full));
        let loading = server_error("LOADING", "Redis is loading the dataset in memory");
        assert!(!refused(&loading));
    }

    #[test]
    fn an_old_server_lacks_it_and_an_acl_denies_it() {
        let old = server_error("ERR", "unknown subcommand 'NO-EVICT'. Try CLIENT HELP.");
        assert_eq!(judge(&old), Support::Absent);
        let acl = server_error(
            "NOPERM",
            "this user has no permissions to run the 'client|no-evict' command",
        );
        assert!(matches!(judge(&acl), Support::Denied(why) if why.contains("NOPERM")));
        let renamed = server_error(
            "ERR",
            "unknown command 'CLIENT', with args beginning with: 'NO-EVICT'",
        );
        assert!(matches!(judge(&renamed), Support::Denied(_)));
    }
}

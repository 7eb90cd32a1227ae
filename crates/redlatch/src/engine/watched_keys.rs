//! What both loss watches share (the one-server watch, `loss_watch.rs`,
//! and the cluster's, `cluster_watch.rs`): the table of watched holds
//! (`watched_holds.rs`), the waiters parked on tracked keys, and the steps of a
//! watch: starting tracking, reading a hold, taking an invalidation,
//! pacing re-reads, marking a hold lost.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::engine::hold::Hold;
use crate::engine::owner_field::OwnerPrefix;
use crate::engine::reread::Rereads;
use crate::engine::wakeup::Nudge;
use crate::transport::no_evict;
use crate::transport::watch::is_master;

/// A token lock's waiter asks for the key it waits for to be tracked on
/// its slot's master (`LossWatch::look_on_cluster`): the key's `PTTL` is
/// sent back once read there; the reply dropped when it could not be.
pub(crate) struct WaiterLook {
    pub(crate) key: Arc<str>,
    pub(crate) reply: oneshot::Sender<i64>,
}

/// How long a new hold waits before its first read: the short holds of a
/// busy client never cost the server a read, and a hold lost before is
/// found by that read, well within the 50 ms the watch promises.
pub(crate) const SETTLE: Duration = Duration::from_millis(10);

/// Most keys read in one pipeline.
pub(super) const CHECK_BATCH: usize = 256;

/// How often a watch through Sentinel asks its server whether it is still
/// the master, while it holds anything: how late a failover that left the
/// old master up (as a replica) is noticed when nothing else is read.
pub(super) const ROLE_EVERY: Duration = Duration::from_secs(1);

/// What the watch asks of the watchdog, which owns the holds.
pub(crate) trait Holds: Send + Sync + 'static {
    /// True while `hold` is tracked: not released, not replaced by a newer
    /// acquisition.
    fn is_current(&self, hold: &Arc<Hold>) -> bool;
    /// Marks `hold` lost (gone from Redis) if it is still current.
    fn mark_gone(&self, hold: &Arc<Hold>);
    /// What the client's anonymous owners start with: a hold keeps only
    /// its numbers.
    fn owner_prefix(&self) -> Arc<OwnerPrefix>;
}

/// Keys that waiters of this client wait for (a token lock's, held by
/// someone else), each with the channels whose parked waiters to wake at
/// its next change: one [`Nudge`] per channel, sent once (a waiter that
/// finds the lock still held tracks the key again).
pub(super) type Waiting = Arc<crate::sync::Mutex<HashMap<Arc<str>, Vec<Nudge>>>>;

pub(crate) use crate::engine::watched_holds::Keys;

/// A connection that lived this long was sound: the next failure starts
/// the reconnect delays from the first again. One that dies sooner (killed
/// at once, refused at once) keeps them growing.
pub(super) const SOUND_FOR: Duration = Duration::from_secs(1);

/// Of the keys an invalidation names, those to read now; the others are
/// scheduled for later by their pacing. True when one is (a key
/// invalidated right after a read: the tracking table evicting it).
pub(super) fn pace(
    keys: &mut Keys,
    rereads: &mut Rereads,
    named: Vec<Arc<str>>,
) -> (Vec<Arc<str>>, bool) {
    let now = tokio::time::Instant::now();
    let mut now_due = Vec::new();
    let mut evicted = false;
    for key in named {
        match keys.invalidated(&key, now) {
            None => {}
            Some(Duration::ZERO) => now_due.push(key),
            Some(delay) => {
                evicted = true;
                rereads.schedule(key, now + delay);
            }
        }
    }
    (now_due, evicted)
}

/// Why a watch connection could not be set up.
pub(super) enum Refusal {
    /// The server refuses tracking: no use trying again.
    ForGood(redis::RedisError),
    /// The server is unreachable now.
    ForNow(redis::RedisError),
}

/// Turns tracking on for a new watch connection (and, with `protect`,
/// makes it unevictable); with whether it may carry the renewals (the
/// server allows `MULTI`).
pub(super) async fn start_tracking(
    conn: &mut MultiplexedConnection,
    protect: bool,
    noloop: bool,
) -> Result<bool, Refusal> {
    // `CACHING yes` is asked once here: every read of the watch and every
    // renewal through it counts on it (a `PING` then takes the flag back).
    // Each answer apart: a refusal's code says whether to try again.
    let mut tracking = redis::cmd("CLIENT");
    tracking.arg("TRACKING").arg("ON").arg("OPTIN");
    if noloop {
        tracking.arg("NOLOOP");
    }
    let answers: Vec<redis::RedisResult<Value>> = redis::pipe()
        .add_command(tracking)
        .cmd("CLIENT")
        .arg("CACHING")
        .arg("yes")
        .cmd("PING")
        .ignore_errors()
        .query_async(conn)
        .await
        .map_err(refusal)?;
    if let Some(Err(error)) = answers.into_iter().find(Result::is_err) {
        return Err(refusal(error));
    }
    if protect {
        // Granted at connect on the command connection: a refusal
        // here changes nothing but the flag.
        let _ = no_evict::protect(conn).await;
    }
    // The renewals' route needs transactions: an ACL without `MULTI`
    // (`@transaction`) leaves the renewals on the command connection.
    // Asked as plain commands (an empty transaction): the client library's
    // transaction reader does not expect a refused `MULTI` (its connection
    // task panics).
    let probe = redis::pipe()
        .cmd("MULTI")
        .cmd("EXEC")
        .ignore_errors()
        .query_async::<Vec<redis::RedisResult<Value>>>(conn)
        .await
        .map_err(refusal)?;
    let transactions = match probe.as_slice() {
        [Ok(_), Ok(_)] => true,
        // `MULTI` allowed, `EXEC` not: the connection would stay in a
        // transaction, queueing the watch's reads.
        [Ok(_), Err(error)] => return Err(Refusal::ForGood(error.clone())),
        _ => false,
    };
    Ok(transactions)
}

/// A server's answer refuses for good (RESP3 or tracking unknown, denied);
/// a broken connection or a server busy starting refuses for now.
pub(super) fn refusal(error: redis::RedisError) -> Refusal {
    match error.code() {
        None | Some("BUSY") => Refusal::ForNow(error),
        Some(_) if crate::error::unavailable_for_now(&error) => Refusal::ForNow(error),
        Some(_) => Refusal::ForGood(error),
    }
}

/// Wakes the waiters of the keys `push` says changed (every waiter for a
/// flush or a lost connection).
pub(super) fn wake_waiters(waiting: &Waiting, push: &PushInfo) {
    let nudges: Vec<Nudge> = {
        let mut waiting = waiting.lock();
        if waiting.is_empty() {
            return;
        }
        match (&push.kind, push.data.first()) {
            (PushKind::Invalidate, Some(Value::Array(names))) => names
                .iter()
                .filter_map(|name| match name {
                    Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
                    Value::SimpleString(text) => Some(text.as_str()),
                    _ => None,
                })
                .filter_map(|name| waiting.remove(name))
                .flatten()
                .collect(),
            (PushKind::Invalidate | PushKind::Disconnection, _) => {
                waiting.drain().flat_map(|(_, nudges)| nudges).collect()
            }
            _ => return,
        }
    };
    nudges.iter().for_each(Nudge::send);
}

/// Wakes every waiter: the watch cannot tell them of changes for now.
pub(super) fn wake_all(waiting: &Waiting) {
    let nudges: Vec<Nudge> = waiting
        .lock()
        .drain()
        .flat_map(|(_, nudges)| nudges)
        .collect();
    nudges.iter().for_each(Nudge::send);
}

/// Wakes every waiter when the watch task ends.
pub(super) struct WakeAllOnDrop(pub(super) Waiting);

impl Drop for WakeAllOnDrop {
    fn drop(&mut self) {
        wake_all(&self.0);
    }
}

/// Adds the read that tells whether `hold` is still held: its owner field
/// of the lock hash, or the value of a token lock's string key.
pub(super) fn read_hold(
    pipeline: &mut redis::Pipeline,
    key: &str,
    hold: &Hold,
    prefix: &OwnerPrefix,
) {
    if hold.kind.string_value() {
        // A token lock: the key's value is the owner.
        pipeline.cmd("GET").arg(key);
    } else {
        pipeline
            .cmd("HEXISTS")
            .arg(key)
            .arg(&*hold.owner.text(prefix));
    }
}

/// Whether the answer to [`read_hold`] says `hold` is still held.
pub(super) fn still_held(
    hold: &Hold,
    value: Value,
    prefix: &OwnerPrefix,
) -> redis::RedisResult<bool> {
    match value {
        Value::BulkString(bytes) if hold.kind.string_value() => Ok(hold.owner.is(&bytes, prefix)),
        Value::Nil => Ok(false),
        value => redis::from_redis_value::<bool>(value).map_err(Into::into),
    }
}

/// Keeps the task's queue empty when there is no watch.
pub(super) async fn drain(
    incoming: &mut UnboundedReceiver<Weak<Hold>>,
    shutdown: &CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            watched = incoming.recv() => if watched.is_none() { return },
        }
    }
}

/// Watches `watched`'s key; the key, unless the hold has already ended.
pub(super) fn add(keys: &mut Keys, watched: Weak<Hold>) -> Option<Arc<str>> {
    keys.add(watched)
}

/// The watched keys an invalidation names (all of them for a flush);
/// `None` when the connection is gone.
pub(super) fn invalidated(push: PushInfo, keys: &mut Keys) -> Option<Vec<Arc<str>>> {
    match push.kind {
        PushKind::Invalidate => {
            let named: Vec<Arc<str>> = match push.data.first() {
                Some(Value::Array(names)) => names
                    .iter()
                    .filter_map(|name| match name {
                        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
                        Value::SimpleString(text) => Some(text.as_str()),
                        _ => None,
                    })
                    .filter_map(|name| keys.key(name))
                    .collect(),
                // A flush: every key.
                _ => keys.keys(),
            };
            Some(named)
        }
        PushKind::Disconnection => None,
        _ => Some(Vec::new()),
    }
}

/// Whether the watch may take its server's answers, from its `ROLE`
/// reply: yes from a master; no from a replica or without an answer. A
/// server that refuses `ROLE` (an ACL, a proxy) cannot tell: from then on
/// this connection's answers are taken without asking (`master_only` off).
pub(super) fn master_or_refused(role: redis::RedisResult<Value>, master_only: &mut bool) -> bool {
    match role {
        Ok(role) => is_master(&role),
        Err(error) if error.code().is_some_and(|code| code != "LOADING") => {
            debug!(%error, "redlatch: the server refuses ROLE; the loss watch cannot tell a demoted master");
            *master_only = false;
            true
        }
        Err(_) => false,
    }
}

/// Marks a hold whose field is gone, and stops watching it.
pub(super) fn lost(holds: &Arc<dyn Holds>, keys: &mut Keys, key: &Arc<str>, hold: &Arc<Hold>) {
    holds.mark_gone(hold);
    keys.remove_hold(key, hold);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: &str, detail: &str) -> redis::RedisError {
        match redis::parse_redis_value(format!("-{code} {detail}\r\n").as_bytes()) {
            Ok(Value::ServerError(error)) => error.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn only_a_master_s_answers_are_taken_unless_the_server_refuses_role() {
        let role = |kind: &str| {
            Value::Array(vec![
                Value::BulkString(kind.as_bytes().to_vec()),
                Value::Int(0),
                Value::Array(Vec::new()),
            ])
        };
        let mut master_only = true;
        assert!(master_or_refused(Ok(role("master")), &mut master_only));
        assert!(!master_or_refused(Ok(role("slave")), &mut master_only));
        let broken = redis::RedisError::from((redis::ErrorKind::Io, "broken pipe"));
        assert!(!master_or_refused(Err(broken), &mut master_only));
        assert!(master_only);
        let denied = refusal(
            "NOPERM",
            "this user has no permissions to run the 'role' command",
        );
        assert!(master_or_refused(Err(denied), &mut master_only));
        assert!(!master_only, "a refused ROLE is not asked again");
    }
}

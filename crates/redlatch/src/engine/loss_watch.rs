//! Loss known at once: a task per client that watches the keys of its held
//! locks through client-side caching and marks a hold lost the moment its
//! key no longer carries it, instead of at the next renewal.
//!
//! The watch connection (RESP3, `CLIENT TRACKING ON OPTIN NOLOOP`: a read
//! tracks its key when `CLIENT CACHING yes` comes before it, and the
//! connection is told of no change it made itself) reads each held key's
//! owner field once (`HEXISTS`), [`SETTLE`] after the hold began (a hold
//! released sooner costs nothing here; one lost sooner is found then); from
//! then on the server pushes an
//! invalidation when that key is changed, deleted, expired, or flushed, and
//! the task reads the field again (which also tracks the key again), at
//! once unless the server keeps invalidating the key right after each read
//! (a full tracking table evicting it: `engine/reread.rs` paces those). A
//! field that is gone, or a key that is no longer a lock hash (`WRONGTYPE`:
//! each reply is its key's answer, never the connection's), marks its hold
//! lost (`LostReason::Gone`), unless the hold was released or replaced
//! meanwhile. A lost watch connection (a restart, a failover) is opened
//! again, after the client's retry delay, and every held key read again.
//! Through Sentinel the watch reads only from the master: a failover can
//! leave the old master up as a replica, with the watch's connection still
//! open to it and its data stale (a resync under way, a broken link), so
//! every read carries `ROLE`, and an idle watch asks it every
//! [`ROLE_EVERY`]; a server that is no longer the master is left for the
//! one Sentinel names now, as if the connection had failed.
//! Our own renewals change the key too: the renewals of lock holds go
//! through this connection (`engine/watched_renewals.rs`), so they push
//! nothing here and leave the key tracked, at no read; a renewal that
//! cannot take that route (the connection down, a demoted master) goes on
//! the command connection, and costs a push and a read here.
//!
//! On a cluster the same task keeps a connection per master instead
//! (`engine/cluster_watch.rs`), and reads there the keys token lock
//! waiters wait for. Where the server refuses tracking (Redis
//! before 6, an ACL without `CLIENT`, a proxy), the watch stays off and the
//! renewals find a lost hold, within a third of its lease.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::engine::cluster_watch;
use crate::engine::hold::Hold;
use crate::engine::reread::Rereads;
use crate::engine::sleep::sleep_until;
use crate::engine::wakeup::Nudge;
pub(crate) use crate::engine::watched_keys::Holds;
use crate::engine::watched_keys::{
    CHECK_BATCH, Keys, ROLE_EVERY, Refusal, SETTLE, SOUND_FOR, WaiterLook, Waiting, WakeAllOnDrop,
    add, drain, invalidated, lost, master_or_refused, pace, read_hold, refusal, start_tracking,
    still_held, wake_all, wake_waiters,
};
use crate::engine::watched_renewals::WatchRoute;
use crate::settings::SharedSettings;
use crate::transport::watch::WatchSource;

/// The handle the watchdog sends newly held keys to.
#[derive(Clone)]
pub(crate) struct LossWatch {
    held: UnboundedSender<Weak<Hold>>,
    route: WatchRoute,
    waiting: Waiting,
    /// On a cluster: waiters' looks, read by the watch on the slot's master.
    cluster_looks: Option<UnboundedSender<WaiterLook>>,
}

impl LossWatch {
    /// Starts the watch task (it ends with `shutdown`). With `protect`,
    /// each watch connection is made unevictable (`CLIENT NO-EVICT ON`).
    pub(crate) fn start(
        source: WatchSource,
        protect: bool,
        holds: Arc<dyn Holds>,
        settings: SharedSettings,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> LossWatch {
        let (held, incoming) = mpsc::unbounded_channel();
        let route = WatchRoute::default();
        let waiting = Waiting::default();
        let (cluster_looks, looks) = match source {
            WatchSource::Cluster(_) => {
                let (send, receive) = mpsc::unbounded_channel();
                (Some(send), Some(receive))
            }
            _ => (None, None),
        };
        runtime.spawn(run(
            source,
            protect,
            holds,
            settings,
            incoming,
            looks,
            route.clone(),
            waiting.clone(),
            shutdown,
        ));
        LossWatch {
            held,
            route,
            waiting,
            cluster_looks,
        }
    }

    /// Wakes `nudge`'s waiter at the next change of `key` this connection
    /// is told of (or when the connection is lost). The waiter then reads
    /// the key through [`WatchRoute::connection`] with `CLIENT CACHING yes`
    /// in front, which tracks it: registered first, so a change right after
    /// that read is not missed.
    pub(crate) fn wake_on_change(&self, key: &Arc<str>, nudge: Nudge) {
        let mut waiting = self.waiting.lock();
        if waiting.len() > 64 && waiting.len().is_power_of_two() {
            // Keys whose waiters all left and that never changed since.
            waiting.retain(|_, nudges| nudges.iter().any(Nudge::is_live));
        }
        let nudges = waiting.entry(key.clone()).or_default();
        nudges.retain(Nudge::is_live);
        // One per channel: a nudge wakes every waiter parked on it.
        if !nudges.iter().any(|known| known.same_channel(&nudge)) {
            nudges.push(nudge);
        }
    }

    /// On a cluster, where the watch keeps a connection per master: wakes
    /// `nudge`'s waiter at the next change of `key` (as
    /// [`wake_on_change`](Self::wake_on_change)), then has the watch read
    /// the key's `PTTL` on its slot's master with `CLIENT CACHING yes` in
    /// front, which tracks it there. The `PTTL`; `None` where the key could
    /// not be tracked (not a cluster, the watch off, a slot half-way
    /// through a migration, a node unreachable): the waiter polls.
    pub(crate) async fn look_on_cluster(&self, key: &Arc<str>, nudge: &Nudge) -> Option<i64> {
        let looks = self.cluster_looks.as_ref()?;
        self.wake_on_change(key, nudge.clone());
        let (reply, answer) = tokio::sync::oneshot::channel();
        looks
            .send(WaiterLook {
                key: key.clone(),
                reply,
            })
            .ok()?;
        answer.await.ok()
    }

    /// The route the watchdog renews watched holds by.
    pub(crate) fn route(&self) -> &WatchRoute {
        &self.route
    }

    /// Watches one more hold (its key and owner field).
    pub(crate) fn watch(&self, watched: Weak<Hold>) {
        // The task is gone only when the client is: nothing left to watch.
        let _ = self.held.send(watched);
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    source: WatchSource,
    protect: bool,
    holds: Arc<dyn Holds>,
    settings: SharedSettings,
    mut incoming: UnboundedReceiver<Weak<Hold>>,
    looks: Option<UnboundedReceiver<WaiterLook>>,
    route: WatchRoute,
    waiting: Waiting,
    shutdown: CancellationToken,
) {
    // Whatever ends this task, no waiter stays parked on it.
    let _wake_all = WakeAllOnDrop(waiting.clone());
    if let (WatchSource::Cluster(nodes), Some(looks)) = (&source, looks) {
        // Renewals stay on the command connection there (the route is
        // never opened): each costs the watch a push and a read.
        return cluster_watch::run(
            nodes.clone(),
            protect,
            holds,
            settings,
            incoming,
            looks,
            waiting,
            shutdown,
        )
        .await;
    }
    let mut keys = Keys::default();
    // New holds, each with the time of its first read.
    let mut settling: VecDeque<(tokio::time::Instant, Weak<Hold>)> = VecDeque::new();
    // Keys whose next read waits (`engine/reread.rs`).
    let mut rereads = Rereads::default();
    // Connections lost (or refused) in a row; `None` before the first.
    let mut failures: Option<u32> = None;
    // A server that granted tracking once and refuses it at a reconnect
    // (a password being rotated, an ACL changed for a moment) may grant it
    // again: only a refusal at the first connection turns the watch off.
    let mut granted_once = false;
    // Such a refusal was logged (once per run of refusals).
    let mut refused_now = false;
    // Our own writes go untold (NOLOOP), until the server's tracking table
    // is seen full: then Redis evicts keys from it while it runs this
    // connection's commands, and NOLOOP leaves those evictions untold too
    // (a key the watch counts as tracked would not be). From then on the
    // watch tracks without NOLOOP and the renewals take the command
    // connection, each costing a push and a read, as before issue 36.
    let mut noloop = true;
    loop {
        if let Some(failed) = failures {
            // Every reconnect waits, by the client's retry policy, as for its
            // other connections: a connection that fails at once must not
            // make a loop of connects.
            let pause = settings.read().retry.delay(failed);
            failures = Some(failed.saturating_add(1));
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        } else {
            failures = Some(0);
        }
        let timeout = settings.read().response_timeout;
        let (pushes_to, mut pushes) = mpsc::unbounded_channel();
        let opened = tokio::select! {
            () = shutdown.cancelled() => return,
            opened = open(&source, protect, noloop, pushes_to, timeout) => opened,
        };
        let (mut conn, transactions) = match opened {
            Ok(opened) => opened,
            Err(Refusal::ForGood(error)) if !granted_once => {
                info!(%error, "redlatch: the server refuses client-side caching; lost holds are found by the renewals");
                drain(&mut incoming, &shutdown).await;
                return;
            }
            Err(Refusal::ForGood(error)) => {
                if !refused_now {
                    warn!(%error, "redlatch: the server refused the loss watch's reconnection; trying again (renewals find lost holds meanwhile)");
                }
                refused_now = true;
                continue;
            }
            Err(Refusal::ForNow(error)) => {
                debug!(%error, "redlatch: loss watch cannot connect; trying again");
                continue;
            }
        };
        granted_once = true;
        refused_now = false;
        let opened_at = tokio::time::Instant::now();
        // Whatever happened while no connection watched: read every key
        // again (a new connection tracks nothing yet).
        rereads.clear();
        let everything: Vec<Arc<str>> = keys.keys();
        let mut master_only = matches!(source, WatchSource::Sentinel(_));
        // Renewals go through this connection until it fails (or a renewal
        // finds it not answering: `broken`, which also ends `watch`).
        let broken = shutdown.child_token();
        let _open_route =
            (noloop && transactions).then(|| route.open(&conn, master_only, broken.clone()));
        if check(
            &mut conn,
            &mut master_only,
            &holds,
            &mut keys,
            &mut rereads,
            everything,
        )
        .await
        .is_ok()
            && watch(
                &mut conn,
                &mut master_only,
                &holds,
                &mut keys,
                &mut settling,
                &mut rereads,
                &mut incoming,
                &mut pushes,
                &waiting,
                noloop,
                // Also cancelled when a renewal got no answer here: a stalled
                // connection hears of no change either.
                &broken,
            )
            .await
                == Ended::TableFull
        {
            info!(
                "redlatch: the server's tracking table is full; the loss watch reads each renewed key back from now on"
            );
            noloop = false;
            wake_all(&waiting);
            // Not a failure: connect again at once.
            failures = None;
            continue;
        }
        // Changes may go untold until a new connection tracks again: the
        // waiters look again (and wait by polling meanwhile).
        wake_all(&waiting);
        if shutdown.is_cancelled() {
            return;
        }
        if opened_at.elapsed() >= SOUND_FOR {
            failures = Some(0);
        }
    }
}

/// Why [`watch`] returned.
#[derive(PartialEq)]
enum Ended {
    /// The connection failed, or the client shut down.
    Failed,
    /// A key was evicted from the server's tracking table (with `noloop`).
    TableFull,
}

/// Watches on one connection until it fails (or the client shuts down),
/// or, tracking with NOLOOP, until the tracking table is seen full.
#[allow(clippy::too_many_arguments)]
async fn watch(
    conn: &mut MultiplexedConnection,
    master_only: &mut bool,
    holds: &Arc<dyn Holds>,
    keys: &mut Keys,
    settling: &mut VecDeque<(tokio::time::Instant, Weak<Hold>)>,
    rereads: &mut Rereads,
    incoming: &mut UnboundedReceiver<Weak<Hold>>,
    pushes: &mut UnboundedReceiver<PushInfo>,
    waiting: &Waiting,
    noloop: bool,
    shutdown: &CancellationToken,
) -> Ended {
    let mut next_role_check = tokio::time::Instant::now() + ROLE_EVERY;
    let mut table_seen: Option<(tokio::time::Instant, bool)> = None;
    loop {
        let next_settled = settling.front().map(|(at, _)| *at);
        let role_check = (*master_only && !keys.is_empty()).then_some(next_role_check);
        let due = tokio::select! {
            () = shutdown.cancelled() => return Ended::Failed,
            Some(watched) = incoming.recv() => {
                settling.push_back((tokio::time::Instant::now() + SETTLE, watched));
                continue;
            }
            () = sleep_until(next_settled) => {
                // Settled together: read them in one pipeline.
                let now = tokio::time::Instant::now();
                let mut due = Vec::new();
                while settling.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, watched)) = settling.pop_front()
                        && let Some(key) = add(keys, watched)
                    {
                        due.push(key);
                    }
                }
                if settling.is_empty() {
                    // A burst of holds leaves no queue behind it.
                    settling.shrink_to(16);
                }
                due
            }
            () = sleep_until(rereads.next()) => rereads.take_due(tokio::time::Instant::now()),
            () = sleep_until(role_check) => {
                next_role_check = tokio::time::Instant::now() + ROLE_EVERY;
                if master_or_refused(
                    redis::cmd("ROLE").query_async::<Value>(conn).await,
                    master_only,
                ) {
                    continue;
                }
                // Demoted, or gone: the master Sentinel names now.
                return Ended::Failed;
            }
            push = pushes.recv() => {
                let Some(push) = push else {
                    return Ended::Failed;
                };
                // Waiters first: they need no read of ours.
                wake_waiters(waiting, &push);
                match invalidated(push, keys) {
                    Some(named) => match pace(keys, rereads, named) {
                        (now_due, true) if noloop => {
                            if table_full(conn, &mut table_seen).await {
                                return Ended::TableFull;
                            }
                            now_due
                        }
                        (now_due, _) => now_due,
                    },
                    None => return Ended::Failed,
                }
            }
        };
        if check(conn, master_only, holds, keys, rereads, due)
            .await
            .is_err()
        {
            return Ended::Failed;
        }
    }
}

/// How long a look at the server's tracking table is taken for its state.
const TABLE_SEEN_FOR: Duration = Duration::from_secs(1);

/// Whether the server's tracking table is full, as the server says. A key
/// invalidated right after a read was either evicted from a full table or
/// written again by someone, maybe to the same name in another database
/// (invalidations name no database): only the first hides evictions from a
/// NOLOOP connection. Full when the table holds half its limit
/// (`tracking-table-max-keys`, 0: no limit) or more, or when the server
/// does not say (`CONFIG` or `INFO` refused). Asked at most once per
/// [`TABLE_SEEN_FOR`].
async fn table_full(
    conn: &mut MultiplexedConnection,
    seen: &mut Option<(tokio::time::Instant, bool)>,
) -> bool {
    if let Some((at, full)) = *seen
        && at.elapsed() < TABLE_SEEN_FOR
    {
        return full;
    }
    let answers: redis::RedisResult<Vec<redis::RedisResult<Value>>> = redis::pipe()
        .cmd("CONFIG")
        .arg("GET")
        .arg("tracking-table-max-keys")
        .cmd("INFO")
        .arg("stats")
        .ignore_errors()
        .query_async(conn)
        .await;
    let full = match answers.as_deref() {
        Ok([Ok(config), Ok(info)]) => match (table_limit(config), tracked_keys(info)) {
            (Some(0), _) => false,
            (Some(limit), Some(tracked)) => tracked.saturating_mul(2) >= limit,
            _ => true,
        },
        _ => true,
    };
    *seen = Some((tokio::time::Instant::now(), full));
    full
}

/// `tracking-table-max-keys` from a `CONFIG GET` reply.
fn table_limit(config: &Value) -> Option<u64> {
    let pairs: Vec<(String, String)> = match config {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    redis::from_redis_value_ref(name).ok()?,
                    redis::from_redis_value_ref(value).ok()?,
                ))
            })
            .collect(),
        other => redis::from_redis_value_ref::<Vec<String>>(other)
            .ok()?
            .chunks(2)
            .filter_map(|pair| match pair {
                [name, value] => Some((name.clone(), value.clone())),
                _ => None,
            })
            .collect(),
    };
    pairs
        .into_iter()
        .find(|(name, _)| name == "tracking-table-max-keys")
        .and_then(|(_, value)| value.parse().ok())
}

/// `tracking_total_keys` from an `INFO stats` reply.
fn tracked_keys(info: &Value) -> Option<u64> {
    let text: String = redis::from_redis_value_ref(info).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("tracking_total_keys:"))
        .and_then(|value| value.trim().parse().ok())
}

/// Opens a watch connection, tracking; with whether it may carry the
/// renewals (`engine/watched_renewals.rs`: the server allows `MULTI`).
async fn open(
    source: &WatchSource,
    protect: bool,
    noloop: bool,
    pushes: UnboundedSender<PushInfo>,
    timeout: Duration,
) -> Result<(MultiplexedConnection, bool), Refusal> {
    let mut conn = source.open(pushes, timeout).await.map_err(refusal)?;
    let transactions = start_tracking(&mut conn, protect, noloop).await?;
    Ok((conn, transactions))
}

/// Reads the owner field of every current hold on `due` keys (which tracks
/// the keys again) and marks the holds whose field is gone, or whose key is
/// no longer a lock hash (overwritten with another type: the lock is gone
/// as surely as if deleted). Holds no longer current are forgotten. Each
/// reply is its key's answer: an error about one key (not `WRONGTYPE`)
/// reads that key again later. An error of the whole call means the
/// connection failed; with `master_only` (Sentinel), so does a server that
/// is no longer the master (`ROLE` at the end of each pipeline): its
/// answers are a replica's, and none is taken.
async fn check(
    conn: &mut MultiplexedConnection,
    master_only: &mut bool,
    holds: &Arc<dyn Holds>,
    keys: &mut Keys,
    rereads: &mut Rereads,
    due: Vec<Arc<str>>,
) -> redis::RedisResult<()> {
    let prefix = holds.owner_prefix();
    let mut asked: Vec<(Arc<str>, Arc<Hold>)> = Vec::new();
    for key in due {
        for hold in keys.holds(&key, |hold| holds.is_current(hold)) {
            asked.push((key.clone(), hold));
        }
    }
    // Many holds ended: give their room back.
    keys.shrink_if_sparse();
    // Pipelines of a bounded size: a burst of 10,000 holds must not leave
    // the connection with buffers sized for all of them.
    for chunk in asked.chunks(CHECK_BATCH) {
        let mut pipeline = redis::pipe();
        for (key, hold) in chunk {
            // Tracked: the read that follows is remembered (OPTIN).
            pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
            read_hold(&mut pipeline, key, hold, &prefix);
        }
        let asks_role = *master_only;
        if asks_role {
            pipeline.cmd("ROLE");
        }
        let mut answers: Vec<redis::RedisResult<Value>> =
            pipeline.ignore_errors().query_async(conn).await?;
        let role = asks_role.then(|| {
            answers.pop().unwrap_or_else(|| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "no ROLE reply",
                )))
            })
        });
        if let Some(role) = role
            && !master_or_refused(role, master_only)
        {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the watch's server is no longer the master",
            )));
        }
        let now = tokio::time::Instant::now();
        for ((key, hold), answer) in chunk.iter().zip(answers) {
            let answer = answer.and_then(|value| still_held(hold, value, &prefix));
            match answer {
                Ok(true) => {
                    keys.found_unchanged(key, now);
                }
                Ok(false) => lost(holds, keys, key, hold),
                Err(error) if error.code() == Some("WRONGTYPE") => {
                    lost(holds, keys, key, hold);
                }
                Err(error) => {
                    debug!(%error, key = %key, "redlatch: loss watch cannot read a key; reading it again later");
                    if let Some(delay) = keys.read_failed(key) {
                        rereads.schedule(key.clone(), now + delay);
                    }
                }
            }
        }
    }
    Ok(())
}

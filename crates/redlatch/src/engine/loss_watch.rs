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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::engine::cluster_watch;
use crate::engine::hold::Hold;
use crate::engine::reread::{Pacing, Rereads};
use crate::engine::sleep::sleep_until;
use crate::engine::wakeup::Nudge;
use crate::engine::watched_renewals::WatchRoute;
use crate::settings::SharedSettings;
use crate::transport::no_evict;
use crate::transport::watch::{WatchSource, is_master};

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
}

/// Keys that waiters of this client wait for (a token lock's, held by
/// someone else), each with the channels whose parked waiters to wake at
/// its next change: one [`Nudge`] per channel, sent once (a waiter that
/// finds the lock still held tracks the key again).
pub(super) type Waiting = Arc<crate::sync::Mutex<HashMap<Arc<str>, Vec<Nudge>>>>;

/// The handle the watchdog sends newly held keys to.
#[derive(Clone)]
pub(crate) struct LossWatch {
    held: UnboundedSender<Weak<Hold>>,
    route: WatchRoute,
    waiting: Waiting,
    /// On a cluster: waiters' looks, read by the watch on the slot's master.
    cluster_looks: Option<UnboundedSender<cluster_watch::WaiterLook>>,
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
            .send(cluster_watch::WaiterLook {
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

/// One watched key: its holds, and the pace of its re-reads. Kept small:
/// a client may watch many thousands of keys.
#[derive(Default)]
pub(super) struct WatchedKey {
    pub(super) holds: Holders,
    pub(super) pacing: Pacing,
}

/// The holds on one watched key (each names its owner field): nearly
/// always one, kept inline; more (a named owner's older hold, read holds)
/// in an allocation of their own.
#[derive(Default)]
pub(super) struct Holders {
    first: Option<Weak<Hold>>,
    // Boxed: 8 bytes in every watched key, not a `Vec`'s 24.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<Weak<Hold>>>>,
}

impl Holders {
    pub(super) fn push(&mut self, hold: Weak<Hold>) {
        match &mut self.first {
            None => self.first = Some(hold),
            Some(_) => self.more.get_or_insert_default().push(hold),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Keeps the holds `keep` says to keep, in any order.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Weak<Hold>) -> bool) {
        if let Some(more) = &mut self.more {
            more.retain(&mut keep);
        }
        if self.first.as_ref().is_some_and(|first| !keep(first)) {
            self.first = None;
        }
        if self.first.is_none() {
            self.first = self.more.as_mut().and_then(|more| more.pop());
        }
        if self.more.as_ref().is_some_and(|more| more.is_empty()) {
            self.more = None;
        }
    }
}

/// Holds watched per key.
pub(super) type Keys = HashMap<Arc<str>, WatchedKey>;

/// A connection that lived this long was sound: the next failure starts
/// the reconnect delays from the first again. One that dies sooner (killed
/// at once, refused at once) keeps them growing.
pub(super) const SOUND_FOR: Duration = Duration::from_secs(1);

#[allow(clippy::too_many_arguments)]
async fn run(
    source: WatchSource,
    protect: bool,
    holds: Arc<dyn Holds>,
    settings: SharedSettings,
    mut incoming: UnboundedReceiver<Weak<Hold>>,
    looks: Option<UnboundedReceiver<cluster_watch::WaiterLook>>,
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
    let mut keys: Keys = HashMap::new();
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
        let everything: Vec<Arc<str>> = keys.keys().cloned().collect();
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
        let Some(watched) = keys.get_mut(&key) else {
            continue;
        };
        match watched.pacing.invalidated(now) {
            Duration::ZERO => now_due.push(key),
            delay => {
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
struct WakeAllOnDrop(Waiting);

impl Drop for WakeAllOnDrop {
    fn drop(&mut self) {
        wake_all(&self.0);
    }
}

/// Adds the read that tells whether `hold` is still held: its owner field
/// of the lock hash, or the value of a token lock's string key.
pub(super) fn read_hold(pipeline: &mut redis::Pipeline, key: &str, hold: &Hold) {
    if hold.kind.string_value() {
        // A token lock: the key's value is the owner.
        pipeline.cmd("GET").arg(key);
    } else {
        pipeline.cmd("HEXISTS").arg(key).arg(&*hold.owner.text());
    }
}

/// Whether the answer to [`read_hold`] says `hold` is still held.
pub(super) fn still_held(hold: &Hold, value: Value) -> redis::RedisResult<bool> {
    match value {
        Value::BulkString(bytes) if hold.kind.string_value() => Ok(hold.owner.is(&bytes)),
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
    let key = watched.upgrade()?.key.clone();
    keys.entry(key.clone()).or_default().holds.push(watched);
    Some(key)
}

/// The watched keys an invalidation names (all of them for a flush);
/// `None` when the connection is gone.
pub(super) fn invalidated(push: PushInfo, keys: &Keys) -> Option<Vec<Arc<str>>> {
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
                    .filter_map(|name| keys.get_key_value(name).map(|(key, _)| key.clone()))
                    .collect(),
                // A flush: every key.
                _ => keys.keys().cloned().collect(),
            };
            Some(named)
        }
        PushKind::Disconnection => None,
        _ => Some(Vec::new()),
    }
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
    let mut asked: Vec<(Arc<str>, Arc<Hold>)> = Vec::new();
    for key in due {
        let Some(watched) = keys.get_mut(&key) else {
            continue;
        };
        watched.holds.retain(|hold| {
            hold.upgrade()
                .filter(|hold| holds.is_current(hold))
                .map(|hold| asked.push((key.clone(), hold)))
                .is_some()
        });
        if watched.holds.is_empty() {
            keys.remove(&key);
        }
    }
    if keys.capacity() > 4 * keys.len() + 64 {
        // Many holds ended: give their room back.
        keys.shrink_to_fit();
    }
    // Pipelines of a bounded size: a burst of 10,000 holds must not leave
    // the connection with buffers sized for all of them.
    for chunk in asked.chunks(CHECK_BATCH) {
        let mut pipeline = redis::pipe();
        for (key, hold) in chunk {
            // Tracked: the read that follows is remembered (OPTIN).
            pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
            read_hold(&mut pipeline, key, hold);
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
            let answer = answer.and_then(|value| still_held(hold, value));
            match answer {
                Ok(true) => {
                    if let Some(watched) = keys.get_mut(key) {
                        watched.pacing.found_unchanged(now);
                    }
                }
                Ok(false) => lost(holds, keys, key, hold),
                Err(error) if error.code() == Some("WRONGTYPE") => {
                    lost(holds, keys, key, hold);
                }
                Err(error) => {
                    debug!(%error, key = %key, "redlatch: loss watch cannot read a key; reading it again later");
                    if let Some(watched) = keys.get_mut(key) {
                        let delay = watched.pacing.read_failed();
                        rereads.schedule(key.clone(), now + delay);
                    }
                }
            }
        }
    }
    Ok(())
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
    if let Some(watched) = keys.get_mut(key) {
        watched
            .holds
            .retain(|watched_hold| !std::ptr::eq(watched_hold.as_ptr(), Arc::as_ptr(hold)));
        if watched.holds.is_empty() {
            keys.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watched key is paid once per held lock's key: it was 64 bytes and
    /// an allocation of 24 for its holds, with the owner field copied in.
    #[test]
    fn a_watched_key_takes_little_room() {
        let size = std::mem::size_of::<(Arc<str>, WatchedKey)>();
        assert!(size <= 40, "{size}");
    }

    #[test]
    fn the_holds_of_a_key_are_kept_inline_until_there_are_two() {
        let holds: Vec<Arc<Hold>> = (0..3).map(|_| test_hold()).collect();
        let mut holders = Holders::default();
        assert!(holders.is_empty());
        for hold in &holds {
            holders.push(Arc::downgrade(hold));
        }
        assert!(holders.more.is_some());
        let second = Arc::as_ptr(&holds[1]);
        holders.retain(|hold| hold.as_ptr() != second);
        let mut left = Vec::new();
        holders.retain(|hold| {
            left.push(hold.as_ptr());
            true
        });
        left.sort();
        let mut expected = vec![Arc::as_ptr(&holds[0]), Arc::as_ptr(&holds[2])];
        expected.sort();
        assert_eq!(left, expected);
        holders.retain(|hold| hold.as_ptr() == Arc::as_ptr(&holds[2]));
        assert!(holders.more.is_none(), "one hold left: inline again");
        assert!(!holders.is_empty());
        holders.retain(|_| false);
        assert!(holders.is_empty());
    }

    fn test_hold() -> Arc<Hold> {
        Arc::new(Hold::new(crate::engine::hold::NewHold {
            key: Arc::from("key"),
            owner: Arc::from("client:owner"),
            kind: crate::engine::hold_kind::HoldKind::Batched(
                &crate::engine::hold_kind::TEST_RENEWAL,
            ),
            lease_ms: 30_000,
            renewed: true,
            token: 1,
            named_owner: false,
            sent_at: crate::lease_clock::LeaseInstant::now(),
        }))
    }

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

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
//! Where the server refuses tracking (Redis before 6, an ACL without
//! `CLIENT`, a proxy) or on a cluster, the watch stays off and the renewals
//! find a lost hold, within a third of its lease.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::engine::hold::{Hold, Watched};
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
const CHECK_BATCH: usize = 256;

/// How often a watch through Sentinel asks its server whether it is still
/// the master, while it holds anything: how late a failover that left the
/// old master up (as a replica) is noticed when nothing else is read.
const ROLE_EVERY: Duration = Duration::from_secs(1);

/// What the watch asks of the watchdog, which owns the holds.
pub(crate) trait Holds: Send + Sync + 'static {
    /// True while `hold` is the current hold of `(key, field)`: not released,
    /// not replaced by a newer acquisition.
    fn is_current(&self, key: &Arc<str>, field: &Arc<str>, hold: &Arc<Hold>) -> bool;
    /// Marks `hold` lost (gone from Redis) if it is still current.
    fn mark_gone(&self, key: &Arc<str>, field: &Arc<str>, hold: &Arc<Hold>);
}

/// Keys that waiters of this client wait for (a token lock's, held by
/// someone else), each with the channels whose parked waiters to wake at
/// its next change: one [`Nudge`] per channel, sent once (a waiter that
/// finds the lock still held tracks the key again).
type Waiting = Arc<crate::sync::Mutex<HashMap<Arc<str>, Vec<Nudge>>>>;

/// The handle the watchdog sends newly held keys to.
#[derive(Clone)]
pub(crate) struct LossWatch {
    held: UnboundedSender<Watched>,
    route: WatchRoute,
    waiting: Waiting,
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
        runtime.spawn(run(
            source,
            protect,
            holds,
            settings,
            incoming,
            route.clone(),
            waiting.clone(),
            shutdown,
        ));
        LossWatch {
            held,
            route,
            waiting,
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

    /// The route the watchdog renews watched holds by.
    pub(crate) fn route(&self) -> &WatchRoute {
        &self.route
    }

    /// Watches one more held key.
    pub(crate) fn watch(&self, watched: Watched) {
        // The task is gone only when the client is: nothing left to watch.
        let _ = self.held.send(watched);
    }
}

/// One watched key: its holds, and the pace of its re-reads.
#[derive(Default)]
struct WatchedKey {
    holds: Vec<(Arc<str>, Weak<Hold>)>,
    pacing: Pacing,
}

/// Holds watched per key.
type Keys = HashMap<Arc<str>, WatchedKey>;

/// A connection that lived this long was sound: the next failure starts
/// the reconnect delays from the first again. One that dies sooner (killed
/// at once, refused at once) keeps them growing.
const SOUND_FOR: Duration = Duration::from_secs(1);

#[allow(clippy::too_many_arguments)]
async fn run(
    source: WatchSource,
    protect: bool,
    holds: Arc<dyn Holds>,
    settings: SharedSettings,
    mut incoming: UnboundedReceiver<Watched>,
    route: WatchRoute,
    waiting: Waiting,
    shutdown: CancellationToken,
) {
    // Whatever ends this task, no waiter stays parked on it.
    let _wake_all = WakeAllOnDrop(waiting.clone());
    if let WatchSource::Unsupported(why) = &source {
        debug!(why, "redlatch: no loss watch; renewals find lost holds");
        drain(&mut incoming, &shutdown).await;
        return;
    }
    let mut keys: Keys = HashMap::new();
    // New holds, each with the time of its first read.
    let mut settling: VecDeque<(tokio::time::Instant, Watched)> = VecDeque::new();
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
    settling: &mut VecDeque<(tokio::time::Instant, Watched)>,
    rereads: &mut Rereads,
    incoming: &mut UnboundedReceiver<Watched>,
    pushes: &mut UnboundedReceiver<PushInfo>,
    waiting: &Waiting,
    noloop: bool,
    shutdown: &CancellationToken,
) -> Ended {
    let mut next_role_check = tokio::time::Instant::now() + ROLE_EVERY;
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
                    if let Some((_, watched)) = settling.pop_front() {
                        due.push(add(keys, watched));
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
                        (_, true) if noloop => return Ended::TableFull,
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

/// Of the keys an invalidation names, those to read now; the others are
/// scheduled for later by their pacing. True when one is (a key
/// invalidated right after a read: the tracking table evicting it).
fn pace(keys: &mut Keys, rereads: &mut Rereads, named: Vec<Arc<str>>) -> (Vec<Arc<str>>, bool) {
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
enum Refusal {
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
        .query_async(&mut conn)
        .await
        .map_err(refusal)?;
    if let Some(Err(error)) = answers.into_iter().find(Result::is_err) {
        return Err(refusal(error));
    }
    if protect {
        // Granted at connect on the command connection: a refusal
        // here changes nothing but the flag.
        let _ = no_evict::protect(&mut conn).await;
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
        .query_async::<Vec<redis::RedisResult<Value>>>(&mut conn)
        .await
        .map_err(refusal)?;
    let transactions = match probe.as_slice() {
        [Ok(_), Ok(_)] => true,
        // `MULTI` allowed, `EXEC` not: the connection would stay in a
        // transaction, queueing the watch's reads.
        [Ok(_), Err(error)] => return Err(Refusal::ForGood(error.clone())),
        _ => false,
    };
    Ok((conn, transactions))
}

/// A server's answer refuses for good (RESP3 or tracking unknown, denied);
/// a broken connection or a server busy starting refuses for now.
fn refusal(error: redis::RedisError) -> Refusal {
    match error.code() {
        None | Some("BUSY") => Refusal::ForNow(error),
        Some(_) if crate::error::unavailable_for_now(&error) => Refusal::ForNow(error),
        Some(_) => Refusal::ForGood(error),
    }
}

/// Wakes the waiters of the keys `push` says changed (every waiter for a
/// flush or a lost connection).
fn wake_waiters(waiting: &Waiting, push: &PushInfo) {
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
fn wake_all(waiting: &Waiting) {
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

/// Keeps the task's queue empty when there is no watch.
async fn drain(incoming: &mut UnboundedReceiver<Watched>, shutdown: &CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            watched = incoming.recv() => if watched.is_none() { return },
        }
    }
}

fn add(keys: &mut Keys, watched: Watched) -> Arc<str> {
    // Nearly always one hold per key: room for one, not the default four.
    keys.entry(watched.key.clone())
        .or_insert_with(|| WatchedKey {
            holds: Vec::with_capacity(1),
            pacing: Pacing::default(),
        })
        .holds
        .push((watched.field, watched.hold));
    watched.key
}

/// The watched keys an invalidation names (all of them for a flush);
/// `None` when the connection is gone.
fn invalidated(push: PushInfo, keys: &Keys) -> Option<Vec<Arc<str>>> {
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
    let mut asked: Vec<(Arc<str>, Arc<str>, Arc<Hold>)> = Vec::new();
    for key in due {
        let Some(watched) = keys.get_mut(&key) else {
            continue;
        };
        watched.holds.retain(|(field, hold)| {
            hold.upgrade()
                .filter(|hold| holds.is_current(&key, field, hold))
                .map(|hold| asked.push((key.clone(), field.clone(), hold)))
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
        for (key, field, hold) in chunk {
            // Tracked: the read that follows is remembered (OPTIN).
            pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
            if hold.kind.string_value() {
                // A token lock: the key's value is the owner.
                pipeline.cmd("GET").arg(&**key);
            } else {
                pipeline.cmd("HEXISTS").arg(&**key).arg(&**field);
            }
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
        for ((key, field, hold), answer) in chunk.iter().zip(answers) {
            let answer = answer.and_then(|value| match value {
                Value::BulkString(bytes) if hold.kind.string_value() => {
                    Ok(bytes == field.as_bytes())
                }
                Value::Nil => Ok(false),
                value => redis::from_redis_value::<bool>(value).map_err(Into::into),
            });
            match answer {
                Ok(true) => {
                    if let Some(watched) = keys.get_mut(key) {
                        watched.pacing.found_unchanged(now);
                    }
                }
                Ok(false) => lost(holds, keys, key, field, hold),
                Err(error) if error.code() == Some("WRONGTYPE") => {
                    lost(holds, keys, key, field, hold);
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
fn master_or_refused(role: redis::RedisResult<Value>, master_only: &mut bool) -> bool {
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
fn lost(
    holds: &Arc<dyn Holds>,
    keys: &mut Keys,
    key: &Arc<str>,
    field: &Arc<str>,
    hold: &Arc<Hold>,
) {
    holds.mark_gone(key, field, hold);
    if let Some(watched) = keys.get_mut(key) {
        watched.holds.retain(|(watched_field, watched_hold)| {
            !(watched_field == field && std::ptr::eq(watched_hold.as_ptr(), Arc::as_ptr(hold)))
        });
        if watched.holds.is_empty() {
            keys.remove(key);
        }
    }
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

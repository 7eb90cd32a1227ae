//! The loss watch on a Redis Cluster: one tracking connection per master
//! that serves a held key, and a hold called lost only on the word of the
//! node that serves its slot now.
//!
//! The same task as on one server (`engine/loss_watch.rs`: a hold's owner
//! field read once it is [`SETTLE`] old, read again when the server pushes
//! an invalidation), with a connection per node instead of one. Which node
//! serves a key's slot is learned from the nodes themselves: a read goes to
//! the node last known to serve the slot (at first, any node), and a node
//! that does not serve it answers `MOVED` with the one that does; the read
//! is sent there, and the slot remembered. So:
//!
//! - An answer "field absent" (or `WRONGTYPE`) counts only from a node that
//!   serves the slot: any other answers `MOVED` (a replica, a former master,
//!   the source of a finished migration) or `ASK`.
//! - An invalidation is only a reason to read the key again, on the slot's
//!   node now. A slot moved away (a classic `MIGRATE` resharding, Valkey 9's
//!   atomic `CLUSTER MIGRATESLOTS`) invalidates the key on the old node
//!   although the lock lives on on the new one; the read that follows finds
//!   it there (through `MOVED`) and tracks it there.
//! - A slot half-way through a classic migration answers `ASK` for a key
//!   already moved: the key is read on the target (`ASKING`, then the read),
//!   which cannot track it (`ASKING` and `CLIENT CACHING yes` each apply to
//!   the next command only), so it is read again every [`ASK_REREAD`] until
//!   the migration ends and the target serves the slot.
//! - Each node's connection works on its own (its opening and its read
//!   pipelines are futures the task polls together): a node that stalls
//!   holds up only its own keys' reads, never another node's.
//! - A node whose connection fails (a failover, a restart, `CLIENT KILL`)
//!   is forgotten as the server of its slots; its keys are read again after
//!   the client's retry delay, on whichever node serves them then.
//! - A master demoted by a failover may keep the connection open and stop
//!   hearing of changes (its replication link to the new master broken):
//!   each read pipeline ends with `ROLE`, and a node that tracks held keys
//!   is asked it every [`ROLE_EVERY`] while idle. A node taken for a master
//!   that says it is a replica is left as a failed one is (its answers not
//!   taken, other than redirections), and its keys read again at once.
//! - A token lock's waiter (`LossWatch::look_on_cluster`) has the key it
//!   waits for read (`PTTL`) the same way, on the slot's master, where the
//!   read tracks it: the key's next change there (the release, the slot
//!   moving away) wakes the waiter, as on one server. A key behind `ASK`
//!   cannot be tracked: the waiter polls.
//!
//! Invalidations name keys without their database, so a write to the same
//! name in another database makes a read here too, which finds the hold.
//! Connections are opened at the first hold on a node and kept: at most one
//! per master. A replica's (a seed that redirected the first reads; `ROLE`
//! is asked when a connection opens) is closed once it has only redirected and
//! another node's is open. Renewals are not routed through these connections
//! (one server's `engine/watched_renewals.rs`): each renewal costs the watch
//! a push and a read. The watch tracks without NOLOOP, so a key the server's
//! full tracking table evicts is told, and paced (`engine/reread.rs`).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, RedisResult, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::engine::hold::Hold;
use crate::engine::owner_field::OwnerPrefix;
use crate::engine::reread::Rereads;
use crate::engine::sleep::sleep_until;
use crate::engine::watched_keys::{
    self, CHECK_BATCH, Holds, Keys, ROLE_EVERY, Refusal, SETTLE, SOUND_FOR, WaiterLook, Waiting,
};
use crate::scripts::keys::slot;
use crate::settings::SharedSettings;
use crate::transport::watch::ClusterNodes;

/// Redirections followed for one key in one round of reads; more (a slot
/// moving again and again) and the key is read again a little later.
const MOST_HOPS: usize = 5;

/// How soon a key found only through `ASK` (its slot half-way through a
/// classic migration, where it cannot be tracked) is read again.
pub(crate) const ASK_REREAD: Duration = Duration::from_millis(50);

/// A push, with the node (and the connection to it) it came from.
type Push = (Arc<str>, u64, PushInfo);

/// The watch's connection to one node.
#[derive(Default)]
struct Node {
    conn: Option<MultiplexedConnection>,
    /// Counts the connections opened: a push from an older one is stale.
    generation: u64,
    /// Connections lost or refused in a row.
    failures: u32,
    /// No connection is opened before this, after a failure.
    retry_at: Option<Instant>,
    opened_at: Option<Instant>,
    /// A connection is being opened: the reads for the node wait here.
    opening: Option<Vec<Read>>,
    /// The node said it was a replica (when the connection opened, or
    /// later: a demoted master).
    replica: bool,
    /// The node refuses `ROLE` (an ACL): it is not asked again.
    role_refused: bool,
    /// When the node last said it was a master (`ROLE`).
    master_at: Option<Instant>,
}

/// One read: a hold's owner field, or the `PTTL` a waiter asked for, on
/// the node its slot leads to.
struct Read {
    key: Arc<str>,
    reader: Reader,
    /// Read on this node with `ASKING` (an `ASK` redirection).
    ask: Option<Arc<str>>,
    /// Redirections followed so far.
    hops: usize,
}

/// Whom a read is for.
enum Reader {
    /// The watch, for a hold on the key.
    Hold(Arc<Hold>),
    /// A token lock's waiter: tracked on the slot's master, it is woken at
    /// the key's next change.
    Waiter(oneshot::Sender<i64>),
}

/// What a node's connection did: opened, answered a pipeline of reads, or
/// said its role.
enum Done {
    Opened {
        node: Arc<str>,
        /// The connection, and whether the node is a replica.
        result: Result<(MultiplexedConnection, bool), Refusal>,
    },
    Read {
        node: Arc<str>,
        generation: u64,
        reads: Vec<Read>,
        answers: RedisResult<Vec<RedisResult<Value>>>,
        /// The `ROLE` asked after the reads (unless the node refuses it).
        role: Option<RedisResult<Value>>,
    },
    Role {
        node: Arc<str>,
        generation: u64,
        answer: RedisResult<Value>,
    },
}

/// A node's work under way. Each node's runs on its own, so a node that
/// stalls (a stopped process, a half-dead connection) holds up no other
/// node's reads, only its own, until the response timeout.
type Work = Pin<Box<dyn Future<Output = Done> + Send>>;

struct Watch {
    source: ClusterNodes,
    protect: bool,
    holds: Arc<dyn Holds>,
    settings: SharedSettings,
    pushes_to: UnboundedSender<Push>,
    keys: Keys,
    /// The node whose connection tracks each watched key now (kept here,
    /// not in the watched key: only a cluster pays for it).
    tracked_on: HashMap<Arc<str>, Arc<str>>,
    nodes: HashMap<Arc<str>, Node>,
    /// The node serving each slot, as the nodes said (`MOVED`).
    owners: HashMap<u16, Arc<str>>,
    seeds: Vec<Arc<str>>,
    rereads: Rereads,
    work: FuturesUnordered<Work>,
    /// Some node granted tracking once.
    granted_once: bool,
    /// The first node refused tracking for good: the watch is off.
    off: bool,
    /// The keys token lock waiters wait for, and whom to wake.
    waiting: Waiting,
    /// When the nodes that track held keys are next asked their `ROLE`.
    next_role_check: Instant,
}

/// Watches held keys, and the keys `looks` ask for, on the cluster's
/// nodes until the client shuts down.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    source: ClusterNodes,
    protect: bool,
    holds: Arc<dyn Holds>,
    settings: SharedSettings,
    mut incoming: UnboundedReceiver<Weak<Hold>>,
    mut looks: UnboundedReceiver<WaiterLook>,
    waiting: Waiting,
    shutdown: CancellationToken,
) {
    let (pushes_to, mut pushes) = mpsc::unbounded_channel();
    let seeds: Vec<Arc<str>> = source.seed_addresses().into_iter().map(Arc::from).collect();
    let mut watch = Watch {
        source,
        protect,
        holds,
        settings,
        pushes_to,
        keys: Keys::default(),
        tracked_on: HashMap::new(),
        nodes: HashMap::new(),
        owners: HashMap::new(),
        seeds,
        rereads: Rereads::default(),
        work: FuturesUnordered::new(),
        granted_once: false,
        off: false,
        waiting,
        next_role_check: Instant::now() + ROLE_EVERY,
    };
    let mut settling: VecDeque<(Instant, Weak<Hold>)> = VecDeque::new();
    loop {
        let next_settled = settling.front().map(|(at, _)| *at);
        let due = tokio::select! {
            () = shutdown.cancelled() => return,
            Some(watched) = incoming.recv() => {
                settling.push_back((Instant::now() + SETTLE, watched));
                continue;
            }
            () = sleep_until(next_settled) => {
                let now = Instant::now();
                let mut due = Vec::new();
                while settling.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, watched)) = settling.pop_front()
                        && let Some(key) = watched_keys::add(&mut watch.keys, watched)
                    {
                        due.push(key);
                    }
                }
                if settling.is_empty() {
                    settling.shrink_to(16);
                }
                due
            }
            () = sleep_until(watch.rereads.next()) => watch.rereads.take_due(Instant::now()),
            () = sleep_until(watch.role_check()) => {
                watch.ask_roles();
                Vec::new()
            }
            Some(look) = looks.recv() => {
                watch.dispatch(vec![Read {
                    key: look.key,
                    reader: Reader::Waiter(look.reply),
                    ask: None,
                    hops: 0,
                }]);
                Vec::new()
            }
            Some((node, generation, push)) = pushes.recv() => {
                // Waiters first: they need no read of ours. A stale
                // connection's push wakes them for nothing, harmlessly.
                watched_keys::wake_waiters(&watch.waiting, &push);
                watch.pushed(&node, generation, push)
            }
            Some(done) = watch.work.next() => {
                watch.done(done);
                Vec::new()
            }
        };
        watch.check(due);
        if watch.off {
            drop(watch);
            // Waiters' looks are refused at once from now on (and those
            // queued dropped): they poll.
            drop(looks);
            watched_keys::drain(&mut incoming, &shutdown).await;
            return;
        }
    }
}

impl Watch {
    /// The keys a push asks to read again (after their pacing).
    fn pushed(&mut self, node: &Arc<str>, generation: u64, push: PushInfo) -> Vec<Arc<str>> {
        let current = self
            .nodes
            .get(node)
            .is_some_and(|state| state.generation == generation && state.conn.is_some());
        if !current {
            return Vec::new();
        }
        match push.kind {
            PushKind::Invalidate => {
                let named = match push.data.first() {
                    Some(Value::Array(_)) => {
                        watched_keys::invalidated(push, &mut self.keys).unwrap_or_default()
                    }
                    // A flush of that node: the keys tracked there, and
                    // those it may have come to track since (a read whose
                    // answer is not in yet names no node: the push can come
                    // first).
                    _ => self
                        .keys
                        .keys()
                        .into_iter()
                        .filter(|key| match self.tracked_on.get(key) {
                            Some(on) => on == node,
                            None => true,
                        } || self.owners.get(&slot(key)) == Some(node))
                        .collect(),
                };
                watched_keys::pace(&mut self.keys, &mut self.rereads, named).0
            }
            PushKind::Disconnection => {
                self.failed(node);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The connection to `node` failed (or could not be opened): its keys
    /// are read again after the retry delay, wherever they are served then.
    /// Returns when that is.
    fn failed(&mut self, node: &Arc<str>) -> Instant {
        let now = Instant::now();
        let settings = self.settings.read().clone();
        let state = self.nodes.entry(node.clone()).or_default();
        state.conn = None;
        if state
            .opened_at
            .take()
            .is_some_and(|at| now.saturating_duration_since(at) >= SOUND_FOR)
        {
            state.failures = 0;
        }
        let retry_at = now + settings.retry.delay(state.failures);
        state.failures = state.failures.saturating_add(1);
        state.retry_at = Some(retry_at);
        self.leave(node, retry_at);
        retry_at
    }

    /// The watch no longer hears of `node`'s changes: its keys are read
    /// again at `at`, wherever they are served then, and the waiters look
    /// again (some waited for keys tracked there).
    fn leave(&mut self, node: &Arc<str>, at: Instant) {
        // A failover may have given its slots to another node.
        self.owners.retain(|_, owner| owner != node);
        let keys = &self.keys;
        let rereads = &mut self.rereads;
        self.tracked_on.retain(|key, on| {
            if on != node {
                return true;
            }
            if keys.contains_key(key) {
                rereads.schedule(key.clone(), at);
            }
            false
        });
        watched_keys::wake_all(&self.waiting);
    }

    /// `node`, taken for a master, said it is a replica now (a failover
    /// demoted it): its answers are a replica's, and its changes may stop
    /// (a broken replication link) without a word. Its connection is
    /// closed, and its keys read again at once on the slots' masters now
    /// (the node itself only redirects, if asked again).
    fn demoted(&mut self, node: &Arc<str>) {
        let Some(state) = self.nodes.get_mut(node) else {
            return;
        };
        state.replica = true;
        state.master_at = None;
        if state.conn.take().is_some() {
            // Its pushes and answers in flight are stale from now on.
            state.generation += 1;
            state.opened_at = None;
        }
        info!(node = %node, "redlatch: a cluster node the loss watch read from is no longer a master; reading its keys on the masters now");
        self.leave(node, Instant::now());
    }

    /// When the nodes tracking held keys are next asked their role: only
    /// while some key is tracked.
    fn role_check(&self) -> Option<Instant> {
        (!self.tracked_on.is_empty()).then_some(self.next_role_check)
    }

    /// Asks `ROLE` of each connected master that tracks a held key and did
    /// not say its role in the last [`ROLE_EVERY`] (its reads ask it too):
    /// a failover that left it up as a replica is noticed although no
    /// change reaches it.
    fn ask_roles(&mut self) {
        let now = Instant::now();
        self.next_role_check = now + ROLE_EVERY;
        let tracking: std::collections::HashSet<&Arc<str>> = self.tracked_on.values().collect();
        for (node, state) in &self.nodes {
            let Some(conn) = &state.conn else {
                continue;
            };
            let recent = state
                .master_at
                .is_some_and(|at| now.saturating_duration_since(at) < ROLE_EVERY);
            if state.replica || state.role_refused || recent || !tracking.contains(node) {
                continue;
            }
            let mut conn = conn.clone();
            let node = node.clone();
            let generation = state.generation;
            self.work.push(Box::pin(async move {
                let answer = redis::cmd("ROLE").query_async(&mut conn).await;
                Done::Role {
                    node,
                    generation,
                    answer,
                }
            }));
        }
    }

    /// Whether `node` may be taken for a master, from its `ROLE` answer
    /// (`None`: not asked, the node refuses it). A node that refuses it
    /// now is not asked again, and taken at its word.
    fn master_by_role(&mut self, node: &Arc<str>, role: Option<RedisResult<Value>>) -> bool {
        let Some(state) = self.nodes.get_mut(node) else {
            return false;
        };
        let Some(role) = role else {
            return !state.replica;
        };
        let mut asks = true;
        let master = watched_keys::master_or_refused(role, &mut asks);
        if !asks {
            state.role_refused = true;
            return !state.replica;
        }
        if master {
            // A replica promoted since is a master like any other.
            state.replica = false;
            state.master_at = Some(Instant::now());
        }
        master
    }

    /// Where a key of `slot` is read: the node said to serve it, else a
    /// connected node said to serve another slot (a master: a replica
    /// among the seeds would only redirect), else a node connected now,
    /// else one not waiting to reconnect, else a seed.
    fn target(&self, slot: u16) -> Option<Arc<str>> {
        if let Some(owner) = self.owners.get(&slot) {
            return Some(owner.clone());
        }
        let now = Instant::now();
        let ready = |state: &Node| state.retry_at.is_none_or(|at| at <= now);
        let connected = |node: &Arc<str>| {
            self.nodes
                .get(node)
                .is_some_and(|state| state.conn.is_some())
        };
        if let Some(master) = self.owners.values().find(|node| connected(node)) {
            return Some(master.clone());
        }
        self.nodes
            .iter()
            .find(|(_, state)| state.conn.is_some())
            .or_else(|| self.nodes.iter().find(|(_, state)| ready(state)))
            .map(|(address, _)| address.clone())
            .or_else(|| {
                self.seeds
                    .iter()
                    .find(|seed| self.nodes.get(*seed).is_none_or(ready))
                    .cloned()
            })
            .or_else(|| {
                self.nodes
                    .iter()
                    .min_by_key(|(_, state)| state.retry_at)
                    .map(|(address, _)| address.clone())
            })
            .or_else(|| self.seeds.first().cloned())
    }

    /// Reads the owner field of every current hold on `due` keys, each on
    /// the node serving its slot (following `MOVED` and `ASK`); the answers
    /// come back through [`done`](Self::done).
    fn check(&mut self, due: Vec<Arc<str>>) {
        let mut reads: Vec<Read> = Vec::new();
        for key in due {
            let holds = &self.holds;
            let current = self.keys.holds(&key, |hold| holds.is_current(hold));
            if current.is_empty() {
                self.tracked_on.remove(&key);
            }
            reads.extend(current.into_iter().map(|hold| Read {
                key: key.clone(),
                reader: Reader::Hold(hold),
                ask: None,
                hops: 0,
            }));
        }
        if self.keys.shrink_if_sparse() {
            let keys = &self.keys;
            self.tracked_on.retain(|key, _| keys.contains_key(key));
            self.tracked_on.shrink_to_fit();
        }
        self.dispatch(reads);
    }

    /// Sends each read to its node.
    fn dispatch(&mut self, reads: Vec<Read>) {
        let mut by_node: HashMap<Arc<str>, Vec<Read>> = HashMap::new();
        for read in reads {
            let node = match &read.ask {
                Some(node) => Some(node.clone()),
                None => self.target(slot(&read.key)),
            };
            // No node known at all: the renewals watch it.
            if let Some(node) = node {
                by_node.entry(node).or_default().push(read);
            }
        }
        for (node, reads) in by_node {
            self.send(node, reads);
        }
    }

    /// Reads `reads` on `node`: on its connection, or once it is open.
    fn send(&mut self, node: Arc<str>, mut reads: Vec<Read>) {
        if reads.is_empty() || self.off {
            return;
        }
        let now = Instant::now();
        let state = self.nodes.entry(node.clone()).or_default();
        if let Some(waiting) = &mut state.opening {
            waiting.append(&mut reads);
            return;
        }
        if let Some(conn) = &state.conn {
            let generation = state.generation;
            let asks_role = !state.role_refused;
            while !reads.is_empty() {
                let rest = reads.split_off(reads.len().min(CHECK_BATCH));
                let chunk = std::mem::replace(&mut reads, rest);
                self.work.push(Box::pin(read(
                    node.clone(),
                    generation,
                    conn.clone(),
                    chunk,
                    asks_role,
                    self.holds.owner_prefix(),
                )));
            }
            return;
        }
        if let Some(at) = state.retry_at
            && at > now
        {
            for read in reads {
                self.later(read, at);
            }
            return;
        }
        state.generation += 1;
        state.opening = Some(reads);
        let generation = state.generation;
        let pushes = self.pushes_to.clone();
        let from = node.clone();
        let sender = move |push: PushInfo| pushes.send((from.clone(), generation, push));
        let timeout = self.settings.read().response_timeout;
        let source = self.source.clone();
        let protect = self.protect;
        self.work.push(Box::pin(async move {
            let result = async {
                let mut conn = source
                    .open(&node, sender, timeout)
                    .await
                    .map_err(watched_keys::refusal)?;
                watched_keys::start_tracking(&mut conn, protect, false).await?;
                // A replica among the seeds only redirects: its connection
                // is closed once a master's is open (`close_if_idle`).
                let role: RedisResult<Value> = redis::cmd("ROLE").query_async(&mut conn).await;
                let replica = matches!(role, Ok(Value::Array(fields)) if matches!(
                    fields.first(),
                    Some(Value::BulkString(role)) if role.as_slice() == b"slave" || role.as_slice() == b"replica"
                ));
                Ok::<_, Refusal>((conn, replica))
            }
            .await;
            Done::Opened { node, result }
        }));
    }

    /// A node's work came back.
    fn done(&mut self, done: Done) {
        match done {
            Done::Opened { node, result } => {
                let state = self.nodes.entry(node.clone()).or_default();
                let waiting = state.opening.take().unwrap_or_default();
                match result {
                    Ok((conn, replica)) => {
                        self.granted_once = true;
                        state.conn = Some(conn);
                        state.replica = replica;
                        state.retry_at = None;
                        state.opened_at = Some(Instant::now());
                        self.send(node, waiting);
                    }
                    Err(Refusal::ForGood(error)) if !self.granted_once => {
                        info!(%error, node = %node, "redlatch: the cluster refuses client-side caching; lost holds are found by the renewals");
                        self.off = true;
                    }
                    Err(Refusal::ForGood(error) | Refusal::ForNow(error)) => {
                        debug!(%error, node = %node, "redlatch: loss watch cannot connect to a cluster node; trying again");
                        let at = self.failed(&node);
                        for read in waiting {
                            self.later(read, at);
                        }
                    }
                }
            }
            Done::Read {
                node,
                generation,
                reads,
                answers,
                role,
            } => match answers {
                Ok(answers) => {
                    // Answers from a connection lost since: what they read
                    // is tracked on no connection now.
                    let current = self.nodes.get(&node).is_some_and(|state| {
                        state.generation == generation && state.conn.is_some()
                    });
                    let was_master = self.nodes.get(&node).is_some_and(|state| !state.replica);
                    // Only a master's answers are taken: a replica's (a
                    // demoted master's, its link maybe broken) may be stale.
                    let master = current && self.master_by_role(&node, role);
                    let mut next = Vec::new();
                    for (read, answer) in reads.into_iter().zip(answers) {
                        self.answered(&node, current, master, read, answer, &mut next);
                    }
                    if current && was_master && !master {
                        self.demoted(&node);
                    }
                    let moved = current && next.iter().any(|read| read.ask.is_none());
                    self.dispatch(next);
                    if moved {
                        self.close_if_idle(&node);
                    }
                }
                Err(error) => {
                    let current = self.nodes.get(&node).is_some_and(|state| {
                        state.generation == generation && state.conn.is_some()
                    });
                    let at = if current {
                        debug!(%error, node = %node, "redlatch: loss watch lost a cluster node's connection");
                        self.failed(&node)
                    } else {
                        self.nodes
                            .get(&node)
                            .and_then(|state| state.retry_at)
                            .unwrap_or_else(Instant::now)
                    };
                    for read in reads {
                        self.later(read, at);
                    }
                }
            },
            Done::Role {
                node,
                generation,
                answer,
            } => {
                let current = self
                    .nodes
                    .get(&node)
                    .is_some_and(|state| state.generation == generation && state.conn.is_some());
                if !current {
                    return;
                }
                match answer {
                    // No answer at all: the connection failed.
                    Err(error) if error.code().is_none() => {
                        debug!(%error, node = %node, "redlatch: loss watch lost a cluster node's connection");
                        self.failed(&node);
                    }
                    answer => {
                        if !self.master_by_role(&node, Some(answer)) {
                            self.demoted(&node);
                        }
                    }
                }
            }
        }
    }

    /// A read that cannot be made now: a hold's key is read again at `at`;
    /// a waiter is answered "not tracked" (it polls).
    fn later(&mut self, read: Read, at: Instant) {
        if let Reader::Hold(_) = read.reader {
            self.rereads.schedule(read.key, at);
        }
    }

    /// One key's answer from `node` (`master`: the node said it is one);
    /// a redirected read goes to `next`.
    fn answered(
        &mut self,
        node: &Arc<str>,
        current: bool,
        master: bool,
        read: Read,
        answer: RedisResult<Value>,
        next: &mut Vec<Read>,
    ) {
        let now = Instant::now();
        // Redirections first: any node's `MOVED` or `ASK` is followed.
        let answer = match answer {
            Err(error) => match redirection(&error, node) {
                Some(_) if read.hops >= MOST_HOPS => {
                    // The slot keeps moving: read it again a little later.
                    self.later(read, now + ASK_REREAD);
                    return;
                }
                // A waiter's key half-way through a classic migration
                // cannot be tracked: it polls.
                Some((_, _, true)) if matches!(read.reader, Reader::Waiter(_)) => return,
                Some((slot, to, asked)) => {
                    if !asked {
                        self.owners.insert(slot, to.clone());
                    }
                    next.push(Read {
                        ask: asked.then_some(to),
                        hops: read.hops + 1,
                        ..read
                    });
                    return;
                }
                None => Err(error),
            },
            answer => answer,
        };
        let hold = match read.reader {
            Reader::Waiter(reply) => {
                if let (Ok(Value::Int(pttl)), true, true, None) =
                    (answer, current, master, &read.ask)
                {
                    // Tracked on the slot's master: the next change wakes it.
                    let _ = reply.send(pttl);
                }
                return;
            }
            Reader::Hold(hold) => hold,
        };
        if !master && answer.is_ok() && read.ask.is_none() {
            // A replica's word, not taken (a connection gone since is
            // handled below): read again on the slot's master.
            if current {
                self.rereads.schedule(read.key, now + ASK_REREAD);
                return;
            }
        }
        let prefix = self.holds.owner_prefix();
        let answer = answer.and_then(|value| watched_keys::still_held(&hold, value, &prefix));
        match answer {
            Ok(true) if read.ask.is_some() => {
                // Held on the migration's target, untracked: look again soon.
                self.rereads.schedule(read.key, now + ASK_REREAD);
            }
            Ok(true) if !current => {
                // Held, but tracked on a connection gone since: read again
                // on the node's next one.
                let at = self.nodes.get(node).and_then(|state| state.retry_at);
                self.rereads.schedule(read.key, at.unwrap_or(now).max(now));
            }
            Ok(true) => {
                if self.keys.contains_key(&read.key) {
                    self.keys.found_unchanged(&read.key, now);
                    self.tracked_on.insert(read.key.clone(), node.clone());
                }
            }
            Ok(false) => self.lost(&read.key, &hold),
            Err(error) if error.code() == Some("WRONGTYPE") => self.lost(&read.key, &hold),
            Err(error) => {
                debug!(%error, key = %read.key, node = %node, "redlatch: loss watch cannot read a key; reading it again later");
                if let Some(delay) = self.keys.read_failed(&read.key) {
                    self.rereads.schedule(read.key, now + delay);
                }
            }
        }
    }

    /// Closes the connection to a replica (which only redirects) when it
    /// serves no slot the watch knows of, tracks no key, and another node's
    /// connection is open or opening (so reads for an unknown slot go
    /// there, not here again): a replica among the seeds keeps no
    /// connection. It is opened again if a read goes there.
    fn close_if_idle(&mut self, node: &Arc<str>) {
        if !self.nodes.get(node).is_some_and(|state| state.replica) {
            return;
        }
        let serves = self.owners.values().any(|owner| owner == node);
        let tracks = self.tracked_on.values().any(|on| on == node);
        let another = self.nodes.iter().any(|(address, state)| {
            address != node && (state.conn.is_some() || state.opening.is_some())
        });
        if serves || tracks || !another {
            return;
        }
        if let Some(state) = self.nodes.get_mut(node)
            && state.conn.take().is_some()
        {
            // Its pushes and answers in flight are stale from now on.
            state.generation += 1;
            state.opened_at = None;
            debug!(node = %node, "redlatch: loss watch closes a connection to a node that serves none of its keys");
        }
    }

    fn lost(&mut self, key: &Arc<str>, hold: &Arc<Hold>) {
        watched_keys::lost(&self.holds, &mut self.keys, key, hold);
        if !self.keys.contains_key(key) {
            self.tracked_on.remove(key);
        }
    }
}

/// Reads `reads` on `conn` in one pipeline: `CLIENT CACHING yes` before
/// each read, so that the node tracks the key, or `ASKING` for a read an
/// `ASK` sent here; with `asks_role`, `ROLE` last (only a master's answers
/// are taken).
async fn read(
    node: Arc<str>,
    generation: u64,
    mut conn: MultiplexedConnection,
    reads: Vec<Read>,
    asks_role: bool,
    prefix: Arc<OwnerPrefix>,
) -> Done {
    let mut pipeline = redis::pipe();
    for read in &reads {
        if read.ask.is_some() {
            pipeline.cmd("ASKING").ignore();
        } else {
            // Tracked: the read that follows is remembered (OPTIN).
            pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
        }
        match &read.reader {
            Reader::Hold(hold) => watched_keys::read_hold(&mut pipeline, &read.key, hold, &prefix),
            Reader::Waiter(_) => {
                pipeline.cmd("PTTL").arg(&*read.key);
            }
        }
    }
    if asks_role {
        pipeline.cmd("ROLE");
    }
    let mut answers: RedisResult<Vec<RedisResult<Value>>> =
        pipeline.ignore_errors().query_async(&mut conn).await;
    let role = match &mut answers {
        Ok(answers) if asks_role => answers.pop(),
        _ => None,
    };
    Done::Read {
        node,
        generation,
        reads,
        answers,
        role,
    }
}

/// A `MOVED` or `ASK` answer: the slot, the node to ask (`host:port`; a
/// reply without a host means the answering node's host), and whether it
/// was `ASK`.
fn redirection(error: &redis::RedisError, node: &str) -> Option<(u16, Arc<str>, bool)> {
    let asked = match error.code() {
        Some("MOVED") => false,
        Some("ASK") => true,
        _ => return None,
    };
    let (to, slot) = error.redirect_node()?;
    let to: Arc<str> = match to.rsplit_once(':') {
        Some(("", port)) => {
            let host = node.rsplit_once(':').map_or(node, |(host, _)| host);
            Arc::from(format!("{host}:{port}"))
        }
        Some(_) => Arc::from(to),
        None => return None,
    };
    Some((slot, to, asked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(text: &str) -> redis::RedisError {
        match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(Value::ServerError(error)) => error.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn redirections_name_the_slot_and_the_node() {
        let moved = server_error("MOVED 3999 127.0.0.1:6381");
        assert_eq!(
            redirection(&moved, "127.0.0.1:6380"),
            Some((3999, Arc::from("127.0.0.1:6381"), false))
        );
        let asked = server_error("ASK 12 10.0.0.2:7000");
        assert_eq!(
            redirection(&asked, "10.0.0.1:7000"),
            Some((12, Arc::from("10.0.0.2:7000"), true))
        );
        // No host: the answering node's.
        let hostless = server_error("MOVED 5 :7002");
        assert_eq!(
            redirection(&hostless, "10.0.0.1:7000"),
            Some((5, Arc::from("10.0.0.1:7002"), false))
        );
        assert_eq!(redirection(&server_error("LOADING wait"), "a:1"), None);
    }
}

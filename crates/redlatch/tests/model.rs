//! Model-based property test: random interleavings of lock, guard and
//! semaphore operations from three clients against one real redis-server,
//! compared after every step with a small in-memory model.
//!
//! The model knows, per lock name, the hash field holding it (`<client-id>:<owner>`),
//! its hold count, the last fencing token handed out, and which guards should
//! report `is_held()`; per semaphore, the permits available. After each step
//! the test reads Redis (HGETALL on the lock hash, GET on the fencing counter
//! and on the semaphore) and asks every live guard for `is_held()` and
//! `token()`. Background work (a dropped guard's release, an abandoned
//! attempt's undo) is given a bounded time to settle before a difference
//! counts as a failure.
//!
//! Two properties, both run by default:
//! - `model_all_operations` includes cancellations at random moments (and right
//!   as the call completes), acquires while the fencing counter holds a
//!   non-integer, and a named owner acquiring again after another client
//!   force-unlocked its hold. Before the engine's fixes it found three
//!   defects, each now covered here:
//!   - a try_acquire (lock or semaphore) or re-entry dropped after its reply
//!     came but before it was polled again kept its hold or permits (the
//!     hold stayed until its 30 s lease ran out; the permits for good);
//!   - a try_acquire on a free lock whose fencing counter held a non-integer
//!     returned an error but left its hold in Redis (PTTL ~30 s);
//!   - a named owner whose hold another client force-unlocked acquired the
//!     lock again (a fresh acquisition in Redis, with a new token), but its
//!     new guard reported the old hold's token.
//! - `model_without_known_defects` leaves those operations out (it keeps the
//!   cancellation of an acquire that is waiting on a held lock), so that the
//!   plain operations get the whole budget of steps.
//!
//! Size: `REDLATCH_MODEL_CASES` cases (default 24) of up to
//! `REDLATCH_MODEL_STEPS` steps (default 30); `REDLATCH_MODEL_SEED` fixes the
//! random seed (it is printed on failure). The default run takes a few
//! seconds. Long mode, about six minutes (5000 cases, 381 s on 2 shared cores):
//!
//! ```text
//! REDLATCH_MODEL_CASES=5000 REDLATCH_MODEL_STEPS=40 cargo test -p redlatch --test model -- --nocapture
//! ```

mod common;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use redis::aio::MultiplexedConnection;
use redlatch::{Client, Error, Guard, SemaphorePermit};
use testkit::RedisServer;

const CLIENTS: usize = 3;
const LOCKS: usize = 2;
const PERMITS: u64 = 4;
const SEMAPHORE: &str = "pool";
/// The named owner each client may acquire as.
const NAMED: &str = "worker";
/// Lease of the fixed-lease acquisitions, which the `Expire` step lets run out.
const FIXED_LEASE: Duration = Duration::from_millis(400);
/// A fixed-lease hold that might run out within this much of a step is
/// waited out before the step, so that no step straddles an expiry.
const HORIZON: Duration = Duration::from_millis(150);
/// How long background work (releases of dropped guards, undone attempts) may take.
const SETTLE: Duration = Duration::from_secs(1);

fn lock_name(lock: usize) -> String {
    format!("m{lock}")
}

// ---------------------------------------------------------------- operations

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A fresh anonymous owner per acquisition.
    Anon,
    /// `with_owner(NAMED)`: acquisitions on one client re-enter.
    Named,
}

/// How an operation is cancelled.
#[derive(Debug, Clone, Copy)]
enum Cancel {
    /// Spawned on the runtime and aborted after this many microseconds (for
    /// a re-entry: polled once, then dropped after this long unless woken by then).
    Abort { after_us: u16 },
    /// Polled once, then dropped right after its reply arrives, without being
    /// polled again: what `select!` does when another branch is ready at the same time.
    DropWhenDone,
}

#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire` with the client's default (watchdog) lease.
    Acquire {
        c: usize,
        l: usize,
        owner: Owner,
    },
    /// `try_acquire_with_lease(FIXED_LEASE)`, anonymous.
    AcquireFixed {
        c: usize,
        l: usize,
    },
    /// `Guard::reenter` on the g-th live guard.
    Reenter {
        g: usize,
    },
    /// `Guard::release`.
    Release {
        g: usize,
    },
    /// Drop the guard (released in the background).
    DropGuard {
        g: usize,
    },
    ForceUnlock {
        c: usize,
        l: usize,
    },
    /// Let every fixed lease run out.
    Expire,
    CancelAcquire {
        c: usize,
        l: usize,
        owner: Owner,
        how: Cancel,
    },
    CancelReenter {
        g: usize,
        how: Cancel,
    },
    /// An `acquire` that waits on a held lock, aborted while it waits.
    CancelWaiting {
        c: usize,
        l: usize,
        after_ms: u8,
    },
    SemAcquire {
        c: usize,
        n: u32,
    },
    SemRelease {
        p: usize,
    },
    SemDrop {
        p: usize,
    },
    SemCancel {
        c: usize,
        n: u32,
        how: Cancel,
    },
    /// SET the fencing counter to a non-integer, `try_acquire`, then SET it back.
    CorruptCounter {
        c: usize,
        l: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mix {
    /// Every operation, the known-defect ones included.
    All,
    /// No cancellation of an acquire that may succeed, no corrupted counter.
    WithoutKnownDefects,
}

fn op_strategy(mix: Mix) -> BoxedStrategy<Op> {
    let c = 0..CLIENTS;
    let l = 0..LOCKS;
    let owner = prop_oneof![Just(Owner::Anon), Just(Owner::Named)];
    let g = 0..8usize;
    let n = 1..=3u32;
    let how = prop_oneof![
        (0..400u16).prop_map(|after_us| Cancel::Abort { after_us }),
        Just(Cancel::DropWhenDone),
    ];
    let common = prop_oneof![
        6 => (c.clone(), l.clone(), owner.clone()).prop_map(|(c, l, owner)| Op::Acquire { c, l, owner }),
        2 => (c.clone(), l.clone()).prop_map(|(c, l)| Op::AcquireFixed { c, l }),
        3 => g.clone().prop_map(|g| Op::Reenter { g }),
        3 => g.clone().prop_map(|g| Op::Release { g }),
        3 => g.clone().prop_map(|g| Op::DropGuard { g }),
        2 => (c.clone(), l.clone()).prop_map(|(c, l)| Op::ForceUnlock { c, l }),
        1 => Just(Op::Expire),
        2 => (c.clone(), l.clone(), 1..20u8).prop_map(|(c, l, after_ms)| Op::CancelWaiting { c, l, after_ms }),
        3 => (c.clone(), n.clone()).prop_map(|(c, n)| Op::SemAcquire { c, n }),
        2 => g.clone().prop_map(|p| Op::SemRelease { p }),
        2 => g.clone().prop_map(|p| Op::SemDrop { p }),
    ];
    match mix {
        Mix::WithoutKnownDefects => common.boxed(),
        Mix::All => prop_oneof![
            12 => common,
            1 => (c.clone(), l.clone(), owner, how.clone())
                .prop_map(|(c, l, owner, how)| Op::CancelAcquire { c, l, owner, how }),
            1 => (g, how.clone()).prop_map(|(g, how)| Op::CancelReenter { g, how }),
            1 => (c.clone(), n, how).prop_map(|(c, n, how)| Op::SemCancel { c, n, how }),
            1 => (c, l).prop_map(|(c, l)| Op::CorruptCounter { c, l }),
        ]
        .boxed(),
    }
}

// --------------------------------------------------------------------- model

/// What a guard should say about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Belief {
    Held,
    Lost,
    /// Redis lost it but this client cannot know yet: another client
    /// force-unlocked it, and the watchdog finds out at its next renewal.
    Unknown,
}

/// When a fixed-lease hold runs out: not before `lo`, surely by `hi`.
#[derive(Debug, Clone, Copy)]
struct Expiry {
    lo: Instant,
    hi: Instant,
}

impl Expiry {
    fn new(sent: Instant, received: Instant) -> Expiry {
        // The guard stops trusting it 1% + 2 ms early; Redis drops it at the lease end.
        let margin = FIXED_LEASE / 100 + Duration::from_millis(5);
        Expiry {
            lo: sent + FIXED_LEASE - margin,
            hi: received + FIXED_LEASE + Duration::from_millis(10),
        }
    }

    /// A re-entry or a partial release sets the lease again.
    fn refresh(&mut self, sent: Instant, received: Instant) {
        let new = Expiry::new(sent, received);
        self.lo = self.lo.min(new.lo);
        self.hi = self.hi.max(new.hi);
    }
}

/// One hold in Redis: the lock hash has `field` → `count`.
#[derive(Debug, Clone)]
struct HoldM {
    field: String,
    count: u32,
    token: u64,
    /// The acquisition that created it (its guards carry the same number).
    epoch: u64,
    fixed: Option<Expiry>,
}

#[derive(Debug, Default)]
struct LockM {
    hold: Option<HoldM>,
    last_token: u64,
    /// A cancelled acquire may or may not have taken a fresh token.
    token_may_grow: bool,
}

struct GuardM {
    guard: Guard,
    lock: usize,
    client: usize,
    field: String,
    token: u64,
    epoch: u64,
}

struct PermitM {
    permit: SemaphorePermit,
    n: u32,
}

struct Case {
    mix: Mix,
    clients: Vec<Client>,
    admin: MultiplexedConnection,
    prefix: String,
    locks: Vec<LockM>,
    guards: Vec<GuardM>,
    /// Per acquisition (epoch): what its guards should report.
    beliefs: HashMap<u64, Belief>,
    next_epoch: u64,
    permits: Vec<PermitM>,
    available: u64,
}

// ------------------------------------------------------------------ helpers

/// A waker that records that it was woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `fut` once, then drops it: right after its reply arrives
/// (`DropWhenDone`), or after `after_us` unless its reply arrived by then,
/// in which case it is polled to completion. Returns its output if it completed.
async fn poll_then_drop<F: Future>(fut: F, how: Cancel) -> Option<F::Output> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    // Unconstrained: tokio's cooperative budget must not wake it before its reply is in.
    let mut fut = std::pin::pin!(tokio::task::unconstrained(fut));
    if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
        return Some(out);
    }
    match how {
        Cancel::DropWhenDone => {
            let deadline = Instant::now() + SETTLE;
            while !flag.0.load(Ordering::SeqCst) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Should the wake-up have come early, give the reply time to arrive.
            tokio::time::sleep(Duration::from_millis(10)).await;
            None
        }
        Cancel::Abort { after_us } => {
            std::thread::sleep(Duration::from_micros(after_us.into()));
            if flag.0.swap(false, Ordering::SeqCst) {
                // Woken in time: it goes on to completion, as a task would.
                Some(fut.await)
            } else {
                None
            }
        }
    }
}

/// Spawns `fut` on the runtime and aborts it after `after_us` (or, for
/// `DropWhenDone`, polls it in place and drops it once its reply is in).
async fn cancel<F>(fut: F, how: Cancel) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match how {
        Cancel::Abort { after_us } => {
            let task = tokio::spawn(fut);
            std::thread::sleep(Duration::from_micros(after_us.into()));
            task.abort();
            task.await.ok()
        }
        Cancel::DropWhenDone => poll_then_drop(fut, how).await,
    }
}

fn pick<T>(items: &[T], index: usize) -> Option<usize> {
    (!items.is_empty()).then(|| index % items.len())
}

type Step = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

impl Case {
    async fn new(server: &RedisServer, case: u64, mix: Mix) -> Case {
        let prefix = format!("case{case}:");
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let client = Client::builder(&server.url())
                .connect_timeout(Duration::from_secs(2))
                .response_timeout(Duration::from_secs(2))
                .key_prefix(prefix.clone())
                .connect()
                .await
                .expect("connect to the test server");
            clients.push(client);
        }
        let admin = common::admin(server).await;
        let set = clients[0]
            .semaphore(SEMAPHORE)
            .try_set_permits(PERMITS as u32)
            .await
            .expect("set the permits");
        assert!(set);
        Case {
            mix,
            clients,
            admin,
            prefix,
            locks: (0..LOCKS).map(|_| LockM::default()).collect(),
            guards: Vec::new(),
            beliefs: HashMap::new(),
            next_epoch: 0,
            permits: Vec::new(),
            available: PERMITS,
        }
    }

    fn key(&self, lock: usize) -> String {
        format!("{}{}", self.prefix, lock_name(lock))
    }

    fn counter_key(&self, lock: usize) -> String {
        format!("redisson_lock_token:{{{}}}", self.key(lock))
    }

    fn lock(&self, c: usize, l: usize, owner: Owner) -> redlatch::Lock {
        let lock = self.clients[c].lock(lock_name(l));
        match owner {
            Owner::Anon => lock,
            Owner::Named => lock.with_owner(NAMED),
        }
    }

    fn named_field(&self, c: usize) -> String {
        format!("{}:{NAMED}", self.clients[c].id())
    }

    /// True when client `c`'s named owner has guards on lock `l` whose hold
    /// Redis lost without the client knowing yet.
    fn stale_named_hold(&self, c: usize, l: usize) -> bool {
        let field = self.named_field(c);
        self.guards.iter().any(|gm| {
            gm.lock == l && gm.field == field && self.beliefs[&gm.epoch] == Belief::Unknown
        })
    }

    /// Waits out every fixed-lease hold that might run out within `horizon`
    /// (all of them when `horizon` is `None`), and forgets it.
    async fn settle_expiries(&mut self, horizon: Option<Duration>) {
        let now = Instant::now();
        let mut until = None;
        for lock in &self.locks {
            if let Some(expiry) = lock.hold.as_ref().and_then(|hold| hold.fixed)
                && horizon.is_none_or(|horizon| expiry.lo <= now + horizon)
            {
                until = until.max(Some(expiry.hi));
            }
        }
        let Some(until) = until else { return };
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        let now = Instant::now();
        for lock in &mut self.locks {
            if let Some(hold) = &lock.hold
                && hold.fixed.is_some_and(|expiry| expiry.hi <= now)
            {
                self.beliefs.insert(hold.epoch, Belief::Lost);
                lock.hold = None;
            }
        }
    }

    /// A fresh acquisition by `field` (the lock was free).
    fn acquired(&mut self, g: Guard, c: usize, l: usize, fixed: Option<Expiry>) -> Step {
        let lock = &mut self.locks[l];
        let token = lock.last_token + 1;
        ensure!(
            g.token() == token,
            "fresh acquisition of lock {l} got token {}, expected {token}",
            g.token()
        );
        lock.last_token = token;
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        lock.hold = Some(HoldM {
            field: g.owner().to_owned(),
            count: 1,
            token,
            epoch,
            fixed,
        });
        self.beliefs.insert(epoch, Belief::Held);
        self.guards.push(GuardM {
            field: g.owner().to_owned(),
            guard: g,
            lock: l,
            client: c,
            token,
            epoch,
        });
        Ok(())
    }

    /// Gives back one hold of `field` on lock `l`, as the release script does:
    /// false when `field` did not hold it.
    fn release_field(&mut self, l: usize, field: &str, sent: Instant, received: Instant) -> bool {
        let lock = &mut self.locks[l];
        match &mut lock.hold {
            Some(hold) if hold.field == field => {
                hold.count -= 1;
                if hold.count == 0 {
                    let epoch = hold.epoch;
                    lock.hold = None;
                    // Guards of that acquisition still alive (given back by
                    // an older guard of the same named owner): Redis no longer
                    // has it, and their client finds out at the next renewal.
                    if self.guards.iter().any(|g| g.epoch == epoch) {
                        self.beliefs.insert(epoch, Belief::Unknown);
                    }
                } else if let Some(expiry) = &mut hold.fixed {
                    expiry.refresh(sent, received);
                }
                true
            }
            _ => false,
        }
    }

    async fn step(&mut self, op: &Op) -> Step {
        let horizon = match op {
            Op::CancelWaiting { after_ms, .. } => {
                HORIZON + Duration::from_millis((*after_ms).into())
            }
            _ => HORIZON,
        };
        self.settle_expiries(Some(horizon)).await;
        match *op {
            Op::Acquire { c, l, owner } => {
                if self.mix == Mix::WithoutKnownDefects
                    && owner == Owner::Named
                    && self.stale_named_hold(c, l)
                {
                    return Ok(());
                }
                let got = self
                    .lock(c, l, owner)
                    .try_acquire()
                    .await
                    .map_err(|e| format!("try_acquire: {e}"))?;
                self.after_acquire(got, c, l, owner, None)?;
            }
            Op::AcquireFixed { c, l } => {
                let sent = Instant::now();
                let got = self
                    .lock(c, l, Owner::Anon)
                    .try_acquire_with_lease(FIXED_LEASE)
                    .await
                    .map_err(|e| format!("try_acquire_with_lease: {e}"))?;
                let expiry = Expiry::new(sent, Instant::now());
                self.after_acquire(got, c, l, Owner::Anon, Some(expiry))?;
            }
            Op::Reenter { g } => {
                let Some(i) = pick(&self.guards, g) else {
                    return Ok(());
                };
                let sent = Instant::now();
                let outcome = self.guards[i].guard.reenter().await;
                let received = Instant::now();
                let gm = &self.guards[i];
                let (l, epoch, field) = (gm.lock, gm.epoch, gm.field.clone());
                let current = self.locks[l]
                    .hold
                    .as_ref()
                    .map(|h| (h.field.clone(), h.epoch));
                match (outcome, current) {
                    (Ok(again), Some((f, e))) if f == field && e == epoch => {
                        ensure!(
                            again.token() == self.guards[i].token,
                            "re-entry of lock {l} has token {}, expected {}",
                            again.token(),
                            self.guards[i].token
                        );
                        let hold = self.locks[l].hold.as_mut().unwrap();
                        hold.count += 1;
                        if let Some(expiry) = &mut hold.fixed {
                            expiry.refresh(sent, received);
                        }
                        let client = self.guards[i].client;
                        let token = self.guards[i].token;
                        self.guards.push(GuardM {
                            guard: again,
                            lock: l,
                            client,
                            field,
                            token,
                            epoch,
                        });
                    }
                    (Err(Error::NotHeld { .. }), Some((f, e))) if f == field && e != epoch => {
                        // The same named owner holds it under a newer acquisition:
                        // the re-entry is given back.
                    }
                    (Err(Error::NotHeld { .. }), current)
                        if current.as_ref().is_none_or(|(f, _)| *f != field) =>
                    {
                        self.beliefs.insert(epoch, Belief::Lost);
                    }
                    (outcome, current) => {
                        return Err(format!(
                            "reenter on lock {l} (guard epoch {epoch}, field {field}) returned {:?}; \
                             Redis holder per the model: {current:?}",
                            outcome.map(|g| g.token())
                        ));
                    }
                }
            }
            Op::Release { g } | Op::DropGuard { g } => {
                let Some(i) = pick(&self.guards, g) else {
                    return Ok(());
                };
                let gm = self.guards.remove(i);
                let sent = Instant::now();
                let (outcome, received) = if matches!(op, Op::Release { .. }) {
                    (Some(gm.guard.release().await), Instant::now())
                } else {
                    drop(gm.guard);
                    // Released in the background: allow it some time.
                    (None, sent + Duration::from_millis(200))
                };
                let held = self.release_field(gm.lock, &gm.field, sent, received);
                match outcome {
                    None => {}
                    Some(Ok(())) => ensure!(
                        held,
                        "release of lock {} succeeded, but the model says {} did not hold it",
                        gm.lock,
                        gm.field
                    ),
                    Some(Err(Error::NotHeld { .. })) => {
                        ensure!(
                            !held,
                            "release of lock {} said NotHeld, but {} held it",
                            gm.lock,
                            gm.field
                        );
                        self.beliefs.insert(gm.epoch, Belief::Lost);
                    }
                    Some(Err(e)) => return Err(format!("release: {e}")),
                }
            }
            Op::ForceUnlock { c, l } => {
                let deleted = self.clients[c]
                    .lock(lock_name(l))
                    .force_unlock()
                    .await
                    .map_err(|e| format!("force_unlock: {e}"))?;
                let was_held = self.locks[l].hold.take();
                ensure!(
                    deleted == was_held.is_some(),
                    "force_unlock of lock {l} returned {deleted}, the model says held = {}",
                    was_held.is_some()
                );
                for gm in &self.guards {
                    if gm.lock != l {
                        continue;
                    }
                    let belief = self.beliefs.get_mut(&gm.epoch).unwrap();
                    if gm.client == c {
                        *belief = Belief::Lost;
                    } else if *belief == Belief::Held {
                        *belief = Belief::Unknown;
                    }
                }
            }
            Op::Expire => self.settle_expiries(None).await,
            Op::CancelAcquire { c, l, owner, how } => {
                let lock = self.lock(c, l, owner);
                let was_free = self.locks[l].hold.is_none();
                let outcome = cancel(async move { lock.try_acquire().await }, how).await;
                match outcome {
                    None | Some(Ok(None)) => {}
                    Some(Ok(Some(guard))) => drop(guard),
                    Some(Err(e)) => return Err(format!("cancelled try_acquire: {e}")),
                }
                self.locks[l].token_may_grow = was_free;
            }
            Op::CancelReenter { g, how } => {
                let Some(i) = pick(&self.guards, g) else {
                    return Ok(());
                };
                let outcome = poll_then_drop(self.guards[i].guard.reenter(), how).await;
                match outcome {
                    None | Some(Ok(_)) => {}
                    Some(Err(Error::NotHeld { .. })) => {
                        let epoch = self.guards[i].epoch;
                        if self.beliefs[&epoch] == Belief::Held {
                            return Err("a cancelled re-entry said NotHeld on a held lock".into());
                        }
                    }
                    Some(Err(e)) => return Err(format!("cancelled reenter: {e}")),
                }
            }
            Op::CancelWaiting { c, l, after_ms } => {
                if self.locks[l].hold.is_none() {
                    return Ok(());
                }
                let lock = self.lock(c, l, Owner::Anon);
                let task = tokio::spawn(async move { lock.acquire().await });
                tokio::time::sleep(Duration::from_millis(after_ms.into())).await;
                task.abort();
                match task.await {
                    Err(e) if e.is_cancelled() => {}
                    // A slow step: the holder's fixed lease ran out while it waited.
                    Ok(Ok(guard))
                        if self.locks[l]
                            .hold
                            .as_ref()
                            .and_then(|hold| hold.fixed)
                            .is_some_and(|expiry| expiry.lo <= Instant::now()) =>
                    {
                        let token = guard.token();
                        drop(guard);
                        self.settle_expiries(None).await;
                        let lock = &mut self.locks[l];
                        ensure!(
                            token == lock.last_token + 1,
                            "an acquire that waited on lock {l} got token {token}, expected {}",
                            lock.last_token + 1
                        );
                        lock.last_token = token;
                    }
                    other => {
                        return Err(format!(
                            "an acquire waiting on held lock {l} ended with {:?}",
                            other.map(|r| r.map(|g| g.token()))
                        ));
                    }
                }
            }
            Op::SemAcquire { c, n } => {
                let got = self.clients[c]
                    .semaphore(SEMAPHORE)
                    .try_acquire(n)
                    .await
                    .map_err(|e| format!("semaphore try_acquire: {e}"))?;
                ensure!(
                    got.is_some() == (self.available >= n.into()),
                    "semaphore try_acquire({n}) gave {}, with {} available",
                    got.is_some(),
                    self.available
                );
                if let Some(permit) = got {
                    self.available -= u64::from(n);
                    self.permits.push(PermitM { permit, n });
                }
            }
            Op::SemRelease { p } | Op::SemDrop { p } => {
                let Some(i) = pick(&self.permits, p) else {
                    return Ok(());
                };
                let pm = self.permits.remove(i);
                self.available += u64::from(pm.n);
                if matches!(op, Op::SemRelease { .. }) {
                    let count = pm
                        .permit
                        .release()
                        .await
                        .map_err(|e| format!("permit release: {e}"))?;
                    ensure!(
                        count == self.available,
                        "permit release returned {count}, expected {}",
                        self.available
                    );
                }
            }
            Op::SemCancel { c, n, how } => {
                let semaphore = self.clients[c].semaphore(SEMAPHORE);
                match cancel(async move { semaphore.try_acquire(n).await }, how).await {
                    None | Some(Ok(None)) => {}
                    Some(Ok(Some(permit))) => drop(permit),
                    Some(Err(e)) => return Err(format!("cancelled semaphore try_acquire: {e}")),
                }
            }
            Op::CorruptCounter { c, l } => {
                let counter = self.counter_key(l);
                let () = redis::cmd("SET")
                    .arg(&counter)
                    .arg("not-a-number")
                    .query_async(&mut self.admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let outcome = self.lock(c, l, Owner::Anon).try_acquire().await;
                let last = self.locks[l].last_token;
                let mut restore = redis::cmd(if last == 0 { "DEL" } else { "SET" });
                restore.arg(&counter);
                if last > 0 {
                    restore.arg(last);
                }
                let _: redis::Value = restore
                    .query_async(&mut self.admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let free = self.locks[l].hold.is_none();
                // The counter is checked before anything else: refused with
                // WrongType, free or held (a busy answer would also be honest).
                match outcome {
                    Err(redlatch::Error::WrongType { .. }) => {}
                    Ok(None) if !free => {}
                    other => {
                        return Err(format!(
                            "try_acquire of lock {l} (free: {free}) with a non-integer fencing counter gave {:?}",
                            other.map(|g| g.map(|g| g.token()))
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn after_acquire(
        &mut self,
        got: Option<Guard>,
        c: usize,
        l: usize,
        owner: Owner,
        fixed: Option<Expiry>,
    ) -> Step {
        let current = self.locks[l].hold.clone();
        match (got, current) {
            (Some(g), None) => self.acquired(g, c, l, fixed),
            (Some(g), Some(hold)) if owner == Owner::Named && hold.field == self.named_field(c) => {
                ensure!(
                    g.token() == hold.token,
                    "named re-acquisition of lock {l} got token {}, expected {}",
                    g.token(),
                    hold.token
                );
                self.locks[l].hold.as_mut().unwrap().count += 1;
                self.guards.push(GuardM {
                    field: g.owner().to_owned(),
                    guard: g,
                    lock: l,
                    client: c,
                    token: hold.token,
                    epoch: hold.epoch,
                });
                Ok(())
            }
            (None, Some(hold)) if owner == Owner::Anon || hold.field != self.named_field(c) => {
                Ok(())
            }
            (got, current) => Err(format!(
                "try_acquire of lock {l} by client {c} ({owner:?}) gave {:?}; the model's holder: {current:?}",
                got.map(|g| (g.owner().to_owned(), g.token()))
            )),
        }
    }

    /// Compares Redis and the guards with the model; `Err` describes the first difference.
    async fn compare(&mut self) -> Step {
        for l in 0..LOCKS {
            let hash: BTreeMap<String, i64> = redis::cmd("HGETALL")
                .arg(self.key(l))
                .query_async(&mut self.admin)
                .await
                .map_err(|e| e.to_string())?;
            let expected: BTreeMap<String, i64> = self.locks[l]
                .hold
                .iter()
                .map(|h| (h.field.clone(), i64::from(h.count)))
                .collect();
            if hash != expected {
                let pttl: i64 = redis::cmd("PTTL")
                    .arg(self.key(l))
                    .query_async(&mut self.admin)
                    .await
                    .map_err(|e| e.to_string())?;
                return Err(format!(
                    "lock {l}: Redis has {hash:?} (PTTL {pttl} ms), the model {expected:?}"
                ));
            }
            let counter: Option<u64> = redis::cmd("GET")
                .arg(self.counter_key(l))
                .query_async(&mut self.admin)
                .await
                .map_err(|e| e.to_string())?;
            let counter = counter.unwrap_or(0);
            let lock = &mut self.locks[l];
            if lock.token_may_grow && counter == lock.last_token + 1 {
                lock.last_token = counter;
            }
            ensure!(
                counter == lock.last_token,
                "lock {l}: fencing counter is {counter}, the model says {}",
                lock.last_token
            );
        }
        for gm in &self.guards {
            ensure!(gm.guard.token() == gm.token, "guard token changed");
            let held = gm.guard.is_held();
            match self.beliefs[&gm.epoch] {
                Belief::Held => ensure!(
                    held,
                    "a guard of lock {} (epoch {}) says it is not held",
                    gm.lock,
                    gm.epoch
                ),
                Belief::Lost => ensure!(
                    !held,
                    "a guard of lock {} (epoch {}) says it is held, but it was lost",
                    gm.lock,
                    gm.epoch
                ),
                Belief::Unknown => {}
            }
        }
        let available: Option<u64> = redis::cmd("GET")
            .arg(format!("{}{SEMAPHORE}", self.prefix))
            .query_async(&mut self.admin)
            .await
            .map_err(|e| e.to_string())?;
        ensure!(
            available == Some(self.available),
            "semaphore: Redis has {available:?} permits available, the model {}",
            self.available
        );
        Ok(())
    }

    /// Compares until Redis and the model agree, for at most `SETTLE`.
    async fn check(&mut self) -> Step {
        let deadline = Instant::now() + SETTLE;
        loop {
            self.settle_expiries(Some(Duration::from_millis(30))).await;
            match self.compare().await {
                Ok(()) => break,
                Err(difference) if Instant::now() >= deadline => {
                    return Err(format!("{difference} (after waiting {SETTLE:?})"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
        for lock in &mut self.locks {
            lock.token_may_grow = false;
        }
        Ok(())
    }
}

async fn run_case(server: &RedisServer, mix: Mix, case: u64, ops: &[Op]) -> Step {
    let mut admin = common::admin(server).await;
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut admin)
        .await
        .map_err(|e| e.to_string())?;
    let mut model = Case::new(server, case, mix).await;
    for (i, op) in ops.iter().enumerate() {
        let outcome = match model.step(op).await {
            Ok(()) => model.check().await,
            Err(error) => Err(error),
        };
        outcome.map_err(|error| format!("step {i} ({op:?}): {error}"))?;
    }
    Ok(())
}

// ------------------------------------------------------------------- runner

fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn run_model(mix: Mix) {
    let cases = env_u32("REDLATCH_MODEL_CASES", 24);
    let steps = env_u32("REDLATCH_MODEL_STEPS", 30).max(1) as usize;
    let seed = std::env::var("REDLATCH_MODEL_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64)
        });
    let config = Config {
        cases,
        max_shrink_iters: env_u32("REDLATCH_MODEL_SHRINK_ITERS", 400),
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    };
    let server = common::server();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let counter = AtomicU64::new(0);
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op_strategy(mix), 1..=steps);
    let result = runner.run(&strategy, |ops| {
        let case = counter.fetch_add(1, Ordering::Relaxed);
        runtime
            .block_on(run_case(&server, mix, case, &ops))
            .map_err(TestCaseError::fail)
    });
    let ran = counter.load(Ordering::Relaxed);
    match result {
        Ok(()) => eprintln!(
            "model: {cases} cases of up to {steps} steps passed in {:.1?} (seed {seed})",
            started.elapsed()
        ),
        Err(TestError::Fail(reason, mut ops)) => {
            // Steps after the failing one played no part.
            let failed_at = reason
                .message()
                .strip_prefix("step ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|step| step.parse::<usize>().ok());
            if let Some(step) = failed_at {
                ops.truncate(step + 1);
            }
            panic!(
                "model: a case failed (seed {seed}, {ran} cases run including shrinking, {:.1?}).\n\
                 Minimal failing sequence ({} steps):\n{ops:#?}\n{reason}",
                started.elapsed(),
                ops.len()
            )
        }
        Err(TestError::Abort(reason)) => panic!("model: aborted (seed {seed}): {reason}"),
    }
}

#[test]
fn model_all_operations() {
    run_model(Mix::All);
}

#[test]
fn model_without_known_defects() {
    run_model(Mix::WithoutKnownDefects);
}

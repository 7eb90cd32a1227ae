//! The watchdog: the client's one renewal engine. One task per client keeps
//! every hold of the client alive: lock holds of every kind, expirable
//! permits, and the Redlock holds this client hosts.
//!
//! Each renewed hold is renewed at a third of its lease
//! ([`renewal_period`]). Renewals due at about the same time go out
//! together: one script call per kind of renewal and hash slot, up to
//! [`RENEW_BATCH`] holds each, so 10,000 held locks cost about 100 round
//! trips per period, not 10,000. A renewal that finds the hold gone marks it
//! lost at once; a hold that could not be renewed before its lease (minus a
//! drift margin) ran out on the lease clock is marked lost then, even if
//! Redis never answered. Fixed-lease holds are not renewed, only marked lost
//! when their lease runs out.
//!
//! The scripts are the primitives' ([`BatchRenewal`](crate::engine::hold_kind::BatchRenewal)): `renew.lua` for lock
//! hash fields (reentrant and fair locks, the write side of read-write
//! locks), `rw_read_renew.lua` for read holds (which also extends their
//! per-hold timeout keys), `permit_renew.lua` for expirable permits. A Redlock hold, which needs a majority of several
//! servers, is renewed by its own callback ([`RenewNow`]) on the same
//! schedule.
//!
//! The holds are indexed by when each is next due (`engine/schedule.rs`):
//! a wake-up visits the due holds only, a reply wakes the task only when it
//! brings the next wake-up forward, and the holds' mutex, which every
//! acquire takes to register its hold, is taken for short steps.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::sync::{AtomicU64, Mutex, Ordering};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, warn};

use crate::engine::hold::{Hold, LostReason, NewHold};
use crate::engine::hold_kind::{BatchRenewal, HoldKind, RenewNow, Renewed};
#[cfg(feature = "holder-records")]
use crate::engine::identity::IdentityPublisher;
use crate::engine::loss_watch::{Holds, LossWatch};
use crate::engine::owner_field::OwnerPrefix;
// fair_lock/ still names renewal_period by this path.
pub(crate) use crate::engine::renewal::renewal_period;
use crate::engine::renewal::{LOG_TARGET, retry_delay};
use crate::engine::schedule::{Entries, Entry, EntryId, HoldKey, Sweep, early_window};
use crate::settings::SharedSettings;
use crate::transport::Connection;

/// Most holds renewed by one script call.
pub(crate) const RENEW_BATCH: usize = 100;

/// Most due holds a sweep visits per locking of the holds' mutex: an
/// acquire registering its hold waits for one step, not a whole sweep.
const SWEEP_STEP: usize = 1_000;

#[cfg(test)]
thread_local! {
    /// Holds visited by sweeps on this thread (the tests count them).
    static SWEPT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One hold in a renewal batch, with the lease sent for it.
#[derive(Clone)]
struct Renewal {
    key: HoldKey,
    hold: Arc<Hold>,
    lease_ms: u64,
    /// Where the watchdog tracks it: the reply finds it there (if it is
    /// still that hold) without hashing its key.
    id: EntryId,
}

struct Shared {
    entries: Mutex<Entries>,
    settings: SharedSettings,
    wake: Notify,
    base: LeaseInstant,
    /// When the task plans to wake next, in ns after `base`.
    next_wake_ns: AtomicU64,
    renewal_round_trips: AtomicU64,
    /// Where newly held lock keys go to be watched, once the watch started.
    loss_watch: std::sync::OnceLock<LossWatch>,
    /// Where new holds go to be named, once the publisher started.
    #[cfg(feature = "holder-records")]
    identity: std::sync::OnceLock<IdentityPublisher>,
    /// What the client's anonymous owners start with: a hold of one keeps
    /// its number, not its text.
    owner_prefix: std::sync::OnceLock<Arc<OwnerPrefix>>,
    /// Keys this client is force-unlocking now (with how many calls): a
    /// hold found gone from one meanwhile was lost to this client's call.
    force_unlocking: Mutex<HashMap<Arc<str>, usize>>,
}

/// Handle to the client's watchdog task.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    /// Starts the task, renewing through `conn`.
    pub(crate) fn start(
        conn: Connection,
        settings: SharedSettings,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Watchdog {
        let shared = Arc::new(Shared::new(settings));
        runtime.spawn(run(Arc::downgrade(&shared), conn, shutdown));
        Watchdog { shared }
    }

    /// What the loss watch may ask about and do to this watchdog's holds.
    pub(crate) fn holds_for_watch(&self) -> Arc<dyn Holds> {
        Arc::new(WatchedHolds(Arc::downgrade(&self.shared)))
    }

    /// Names every hold from now on (`engine/identity.rs`).
    #[cfg(feature = "holder-records")]
    pub(crate) fn set_identity(&self, publisher: IdentityPublisher) {
        let _ = self.shared.identity.set(publisher);
    }

    /// The loss watch, once it started (none on a lean client).
    pub(crate) fn loss_watch(&self) -> Option<&LossWatch> {
        self.shared.loss_watch.get()
    }

    /// From now on, a hold of one of the client's anonymous owners (written
    /// `prefix` and a number) keeps the number only.
    pub(crate) fn set_owner_prefix(&self, prefix: Arc<OwnerPrefix>) {
        let _ = self.shared.owner_prefix.set(prefix);
    }

    /// From now on, every lock hold is also watched by `watch`.
    pub(crate) fn set_loss_watch(&self, watch: LossWatch) {
        let _ = self.shared.loss_watch.set(watch);
    }

    /// Registers the guard of an acquisition (fresh, a permit, or a
    /// re-entry by a named owner), returning the hold it shares with the
    /// other guards of the same acquisition.
    ///
    /// The fencing token names the acquisition: a fresh one increments the
    /// lock's counter and a re-entry reads it, and nobody else can
    /// increment it while this owner holds the lock. So replies about one
    /// acquisition join one hold whatever order they are seen in (two
    /// acquires of one named owner that left in one batch: the re-entry's
    /// reply may be seen first), a tracked hold with an older token was
    /// lost before a renewal noticed (force-unlocked elsewhere, expired),
    /// and a reply with an older token than the tracked hold's is about a
    /// hold that is already gone.
    pub(crate) fn register(&self, new: NewHold) -> Arc<Hold> {
        let mut entries = self.shared.entries.lock();
        // An anonymous owner is unique to one acquire, which registers one
        // hold: only a named owner's replies can meet a tracked hold.
        let tracked = if new.named_owner {
            entries
                .get(&(new.key.clone(), new.owner.clone()))
                .filter(|entry| !entry.hold.is_marked_lost())
                .map(|entry| entry.hold.clone())
        } else {
            None
        };
        if let Some(tracked) = tracked {
            if new.token == tracked.token {
                self.join(
                    &mut entries,
                    &tracked,
                    new.sent_at,
                    new.lease_ms,
                    new.renewed,
                );
                return tracked;
            }
            if new.token < tracked.token {
                let stale = Arc::new(Hold::with_prefix(new, self.shared.owner_prefix.get()));
                stale.mark_lost(LostReason::Gone);
                return stale;
            }
            tracked.mark_lost(LostReason::Gone);
        }
        let sent_at = new.sent_at;
        let hold = Arc::new(Hold::with_prefix(new, self.shared.owner_prefix.get()));
        self.insert(&mut entries, hold.clone(), sent_at);
        hold
    }

    /// A new guard joined `hold` with a request sent at `sent_at` that set
    /// a lease of `lease_ms`: its lease is confirmed, and if it asks for
    /// renewal the hold is renewed from now on (invariant (b)).
    fn join(
        &self,
        entries: &mut Entries,
        hold: &Arc<Hold>,
        sent_at: LeaseInstant,
        lease_ms: u64,
        renewed: bool,
    ) {
        let Some(id) = entries.id_of(hold) else {
            return;
        };
        let was_renewed = hold.renewed();
        hold.count_guard(renewed, true);
        hold.confirm(sent_at, lease_ms);
        let due = entries.update_at(id, |entry| {
            entry.guards += 1;
            // It was a fixed lease until now: the first renewal is due a
            // renewal period after the request that asked for it.
            (renewed && !was_renewed && !entry.renewing).then(|| {
                entry.next_renewal = sent_at + renewal_period(lease_ms);
                entry.next_renewal
            })
        });
        if let Some(Some(due)) = due {
            self.shared.wake_if_before(due);
        }
    }

    /// True while this client tracks a live hold of `owner` on `key`: an
    /// acquire by that (named) owner re-enters rather than waits.
    pub(crate) fn holds(&self, key: &str, owner: &str) -> bool {
        let entries = self.shared.entries.lock();
        entries
            .get(&(Arc::from(key), Arc::from(owner)))
            .is_some_and(|entry| entry.hold.is_held())
    }

    /// True while this client tracks a live hold of `owner` on `key`,
    /// anonymous owners included (walking every hold: for rare callers,
    /// the deadlock check's).
    pub(crate) fn holds_any(&self, key: &str, owner: &str) -> bool {
        let entries = self.shared.entries.lock();
        entries.tracks(key, owner)
    }

    /// Tracks a hold built elsewhere (a Redlock hold, renewed by its
    /// callback), acquired with a request sent at `sent_at`, with one guard.
    pub(crate) fn track(&self, hold: Arc<Hold>, sent_at: LeaseInstant) {
        let mut entries = self.shared.entries.lock();
        self.insert(&mut entries, hold, sent_at);
    }

    fn insert(&self, entries: &mut Entries, hold: Arc<Hold>, sent_at: LeaseInstant) {
        // Locks of this server only: a Redlock hold is lost only on a majority.
        if hold.kind.is_lock()
            && let Some(watch) = self.shared.loss_watch.get()
        {
            watch.watch(Arc::downgrade(&hold));
        }
        // Holds of this server only: a Redlock hold's keys are elsewhere.
        #[cfg(feature = "holder-records")]
        if !matches!(hold.kind, HoldKind::Callback(_))
            && let Some(identity) = self.shared.identity.get()
        {
            identity.publish(hold.clone());
        }
        let next_renewal = sent_at + renewal_period(hold.lease_ms());
        let due = entries.insert(Entry::new(hold, 1, next_renewal));
        self.shared.wake_if_before(due);
    }

    /// Adds a re-entered guard to an existing hold, whose re-entry request
    /// sent at `sent_at` set a lease of `lease_ms` (the lease sent, not the
    /// hold's current one: a renewal may have changed that meanwhile);
    /// `renewed`: whether the new guard asks for renewal. False when the
    /// hold is no longer tracked (it was lost meanwhile).
    pub(crate) fn add_guard(
        &self,
        hold: &Arc<Hold>,
        sent_at: LeaseInstant,
        lease_ms: u64,
        renewed: bool,
    ) -> bool {
        let mut entries = self.shared.entries.lock();
        if entries.id_of(hold).is_none() || hold.is_marked_lost() {
            return false;
        }
        self.join(&mut entries, hold, sent_at, lease_ms, renewed);
        true
    }

    /// Drops one guard of `hold` (`renewed`: whether it asked for renewal);
    /// the last one stops the renewals, and so does the last guard that
    /// asked for them (the others' fixed leases then run out).
    pub(crate) fn remove_guard(&self, hold: &Arc<Hold>, renewed: bool) {
        let mut entries = self.shared.entries.lock();
        if let Some(id) = entries.id_of(hold) {
            hold.count_guard(renewed, false);
            let left = entries.update_at(id, |entry| {
                entry.guards -= 1;
                entry.guards
            });
            if left == Some(0) {
                entries.remove_at(id);
            }
        }
    }

    /// Notes that this client is force-unlocking `key` until the returned
    /// value drops: its holds there that the loss watch or a renewal finds
    /// gone meanwhile (before the call's reply, which marks them) were lost
    /// to that call, not to someone else.
    pub(crate) fn force_unlocking(&self, key: &Arc<str>) -> ForceUnlocking {
        *self
            .shared
            .force_unlocking
            .lock()
            .entry(key.clone())
            .or_insert(0) += 1;
        ForceUnlocking {
            shared: self.shared.clone(),
            key: key.clone(),
        }
    }

    /// Marks the lock holds on `key` lost that this client's force-unlock
    /// took down: those acquired with a token up to `up_to` (the counter
    /// when the lock was deleted; `None`: unknown, every hold). A later
    /// acquisition of this client, whose reply was read before the
    /// force-unlock's, is held.
    pub(crate) fn mark_key_lost(&self, key: &str, up_to: Option<u64>) {
        let mut entries = self.shared.entries.lock();
        entries.retain(|(entry_key, _), entry| {
            // A Redlock hold needs more than one server's unlock to be lost.
            if &**entry_key == key
                && entry.hold.kind.is_lock()
                && up_to.is_none_or(|up_to| entry.hold.token <= up_to)
            {
                entry.hold.mark_lost(LostReason::ForceUnlocked);
                false
            } else {
                true
            }
        });
    }

    /// Marks lost the hold on `key` whose owner is `owner`: the token lock
    /// this client's force-unlock deleted, by the token the key held (its
    /// holds carry no order a counter could tell apart).
    pub(crate) fn mark_owner_lost(&self, key: &str, owner: &str) {
        let mut entries = self.shared.entries.lock();
        entries.retain(|(entry_key, _), entry| {
            if &**entry_key == key
                && entry.hold.kind.is_lock()
                && entry.hold.owner.is(owner.as_bytes())
            {
                entry.hold.mark_lost(LostReason::ForceUnlocked);
                false
            } else {
                true
            }
        });
    }

    /// Brings the next renewal of every hold that follows the default lease
    /// forward to now (the default lease changed: held locks and permits
    /// should get it promptly).
    pub(crate) fn renew_all_soon(&self) {
        let now = LeaseInstant::now();
        self.shared.entries.lock().update_all(|entry| {
            if entry.hold.renewed() && entry.hold.kind.follows_default_lease() {
                entry.next_renewal = now;
            }
        });
        self.shared.wake.notify_one();
    }

    /// Lock holds currently tracked (one per owner and lock).
    pub(crate) fn held_count(&self) -> usize {
        self.shared.entries.lock().locks()
    }

    /// Renewal script calls made so far on this client's connection (batched
    /// renewals; a Redlock renewal by callback is counted by none).
    pub(crate) fn renewal_round_trips(&self) -> u64 {
        self.shared.renewal_round_trips.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// The state of a watchdog with no hold yet.
    fn new(settings: SharedSettings) -> Shared {
        Shared {
            entries: Mutex::new(Entries::default()),
            settings,
            wake: Notify::new(),
            base: LeaseInstant::now(),
            next_wake_ns: AtomicU64::new(u64::MAX),
            renewal_round_trips: AtomicU64::new(0),
            loss_watch: std::sync::OnceLock::new(),
            #[cfg(feature = "holder-records")]
            identity: std::sync::OnceLock::new(),
            owner_prefix: std::sync::OnceLock::new(),
            force_unlocking: Mutex::new(HashMap::new()),
        }
    }
}

impl Shared {
    /// Why a hold of `key` that Redis no longer has was lost.
    fn gone_reason(&self, key: &str) -> LostReason {
        if self.force_unlocking.lock().contains_key(key) {
            LostReason::ForceUnlocked
        } else {
            LostReason::Gone
        }
    }

    fn ns(&self, at: LeaseInstant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn wake_if_before(&self, due: LeaseInstant) {
        if self.ns(due) < self.next_wake_ns.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }

    /// Marks expired holds lost, and picks the renewals that are due (or
    /// nearly: renewing a little early lets more holds share a batch).
    /// Visits only the holds due by now (each within its early window), a
    /// step of at most [`SWEEP_STEP`] holds per locking of the mutex.
    fn sweep(&self, now: LeaseInstant) -> Vec<Renewal> {
        self.sweep_in_steps(now, SWEEP_STEP)
    }

    /// [`Shared::sweep`], `step` holds per locking of the mutex.
    fn sweep_in_steps(&self, now: LeaseInstant, step: usize) -> Vec<Renewal> {
        let mut due = Vec::new();
        let default_lease_ms = self.settings.read().default_lease.as_millis() as u64;
        let mut sweep = Sweep::new(now);
        loop {
            let mut entries = self.entries.lock();
            let more = entries.sweep_step(&mut sweep, step, |id, entry| {
                #[cfg(test)]
                SWEPT.with(|swept| swept.set(swept.get() + 1));
                let hold = &entry.hold;
                if hold.is_marked_lost() {
                    return false;
                }
                if let HoldKind::Callback(callback) = &hold.kind
                    && callback.strong_count() == 0
                {
                    // Its owner is gone: nothing left to renew or tell.
                    return false;
                }
                if now >= hold.valid_until() {
                    let reason = if hold.renewed() {
                        warn!(target: LOG_TARGET, key = %hold.key, kind = ?hold.kind, token = hold.token, "redlatch: lease ran out before a renewal got through; hold lost");
                        LostReason::NotRenewed
                    } else {
                        LostReason::LeaseRanOut
                    };
                    hold.mark_lost(reason);
                    return false;
                }
                if hold.renewed()
                    && !entry.renewing
                    && entry.next_renewal <= now + early_window(hold.lease_ms())
                {
                    entry.renewing = true;
                    due.push(Renewal {
                        key: (hold.key.clone(), hold.owner.text()),
                        hold: hold.clone(),
                        id,
                        // Renewed locks and permits follow the live default lease.
                        lease_ms: if hold.kind.follows_default_lease() {
                            default_lease_ms
                        } else {
                            hold.lease_ms()
                        },
                    });
                }
                true
            });
            drop(entries);
            if !more {
                return due;
            }
        }
    }

    /// Plans the task's next wake-up (`idle_until` when nothing is held)
    /// and publishes it, so that holds due before it wake the task.
    fn plan_wake(&self, idle_until: LeaseInstant) -> LeaseInstant {
        // While planning, anything due wakes the task (a permit it finds
        // when it parks): a hold settled after `next_due` read it would
        // otherwise wait for a wake-up planned without it.
        self.next_wake_ns.store(u64::MAX, Ordering::Release);
        let next = self.next_due().unwrap_or(idle_until);
        self.next_wake_ns.store(self.ns(next), Ordering::Release);
        next
    }

    /// The next instant anything needs the task: a renewal or an expiry.
    fn next_due(&self) -> Option<LeaseInstant> {
        self.entries.lock().earliest()
    }

    /// Applies the outcome of one renewal batch: per hold, 1 renewed, 0 gone.
    /// Wakes the task only when a hold of the batch is now due before the
    /// task's planned wake-up (a retry soon, or a renewal due before the
    /// hold the task sleeps for): waking it after every batch made each
    /// batch cost a walk over every hold, quadratic in the holds a client
    /// keeps (docs/BENCHMARKS.md, measure 9).
    fn settle(&self, batch: &[Renewal], sent_at: LeaseInstant, outcome: Result<Vec<i64>, String>) {
        let earliest = self.settle_entries(batch, sent_at, outcome);
        if let Some(due) = earliest {
            self.wake_if_before(due);
        }
    }

    /// [`Shared::settle`]'s bookkeeping; returns the earliest instant a hold
    /// of the batch is due again.
    fn settle_entries(
        &self,
        batch: &[Renewal],
        sent_at: LeaseInstant,
        outcome: Result<Vec<i64>, String>,
    ) -> Option<LeaseInstant> {
        let now = LeaseInstant::now();
        let mut earliest: Option<LeaseInstant> = None;
        let mut entries = self.entries.lock();
        match &outcome {
            Ok(renewed) => {
                let count = renewed.iter().filter(|flag| **flag == 1).count();
                crate::engine::metrics::renewed(count as u64);
                let failed = renewed
                    .iter()
                    .filter(|flag| **flag == RENEWAL_FAILED)
                    .count();
                if failed > 0 {
                    crate::engine::metrics::renewal_failed(failed as u64);
                }
                debug!(
                    target: LOG_TARGET,
                    renewed = count,
                    holds = batch.len(),
                    "redlatch: renewal round: {count} of {} hold(s) renewed",
                    batch.len()
                );
            }
            Err(_) => crate::engine::metrics::renewal_failed(batch.len() as u64),
        }
        for (
            index,
            Renewal {
                key,
                hold,
                lease_ms,
                id,
            },
        ) in batch.iter().enumerate()
        {
            let current = entries.current(*id, hold);
            let mut next_renewal = |entries: &mut Entries, at: LeaseInstant| {
                entries.update_at(*id, |entry| {
                    entry.renewing = false;
                    entry.next_renewal = at;
                });
                earliest = Some(earliest.map_or(at, |earliest| earliest.min(at)));
            };
            match &outcome {
                Ok(renewed) if renewed.get(index) == Some(&1) => {
                    // A callback confirms its hold itself, against its own validity.
                    if !matches!(hold.kind, HoldKind::Callback(_)) {
                        hold.confirm(sent_at, *lease_ms);
                    }
                    if current {
                        next_renewal(&mut entries, sent_at + renewal_period(*lease_ms));
                    }
                }
                // This hold's own renewal failed: retried soon, as a failed call.
                Ok(renewed) if renewed.get(index) == Some(&RENEWAL_FAILED) => {
                    debug!(target: LOG_TARGET, key = %key.0, "redlatch: renewal failed, retrying");
                    if current {
                        next_renewal(&mut entries, now + retry_delay(hold.lease_ms()));
                    }
                }
                // Released meanwhile (its last guard left before the reply
                // came): the renewal ran after the release, and nothing was lost.
                Ok(_) if !current => {}
                Ok(_) => {
                    warn!(target: LOG_TARGET, key = %key.0, kind = ?hold.kind, token = hold.token, "redlatch: renewal found the hold gone; hold lost");
                    hold.mark_lost(self.gone_reason(&key.0));
                    entries.remove_at(*id);
                }
                Err(error) => {
                    debug!(target: LOG_TARGET, key = %key.0, %error, "redlatch: renewal failed, retrying");
                    if current {
                        next_renewal(&mut entries, now + retry_delay(hold.lease_ms()));
                    }
                }
            }
        }
        earliest
    }
}

async fn run(shared: Weak<Shared>, conn: Connection, shutdown: CancellationToken) {
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        // With nothing to renew, look again one renewal period of the
        // default lease from now: a hold taken meanwhile with that lease is
        // due no sooner, so registering it need not wake this task (one
        // acquire after another would otherwise cost a wake-up, often on
        // another thread, per acquire).
        let default_lease_ms = strong.settings.read().default_lease.as_millis() as u64;
        let idle_until = LeaseInstant::now() + renewal_period(default_lease_ms);
        let next = strong.plan_wake(idle_until);
        let sleep_for = next.saturating_duration_since(LeaseInstant::now());
        {
            let notified = strong.wake.notified();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = notified => {}
                _ = tokio::time::sleep(sleep_for) => {}
            }
        }
        let now = LeaseInstant::now();
        let due = strong.sweep(now);
        let (batched, callbacks) = plan(due, conn.is_cluster());
        for batch in batched {
            let shared = Arc::downgrade(&strong);
            let conn = conn.clone();
            tokio::spawn(renew_batch(shared, conn, batch));
        }
        for renewal in callbacks {
            tokio::spawn(renew_by_callback(Arc::downgrade(&strong), renewal));
        }
        drop(strong);
    }
}

/// Splits due renewals into script calls (one script per call, never mixed;
/// see [`batches`]) and the holds that renew themselves, one call each.
fn plan(due: Vec<Renewal>, cluster: bool) -> (Vec<Vec<Renewal>>, Vec<Renewal>) {
    // Few kinds of renewal exist (one per primitive's script): a short list.
    let mut by_script: Vec<Vec<Renewal>> = Vec::new();
    let mut callbacks = Vec::new();
    for renewal in due {
        if let HoldKind::Callback(_) = renewal.hold.kind {
            callbacks.push(renewal);
            continue;
        }
        match by_script
            .iter_mut()
            .find(|same| same[0].hold.kind.same_batch(&renewal.hold.kind))
        {
            Some(same) => same.push(renewal),
            None => by_script.push(vec![renewal]),
        }
    }
    let batched = by_script
        .into_iter()
        .flat_map(|same_script| batches(same_script, cluster))
        .collect();
    (batched, callbacks)
}

/// Splits due renewals of one script into calls of at most [`RENEW_BATCH`]
/// holds. On a cluster one call may only touch keys of one hash slot, so
/// renewals are grouped by the slot of their key first.
fn batches(mut due: Vec<Renewal>, cluster: bool) -> Vec<Vec<Renewal>> {
    if !cluster {
        return due.chunks(RENEW_BATCH).map(<[Renewal]>::to_vec).collect();
    }
    let slot = |renewal: &Renewal| crate::scripts::keys::slot(&renewal.key.0);
    due.sort_by_cached_key(slot);
    due.chunk_by(|a, b| slot(a) == slot(b))
        .flat_map(|same_slot| same_slot.chunks(RENEW_BATCH))
        .map(<[Renewal]>::to_vec)
        .collect()
}

/// Sends one renewal batch, bounded by the earliest lease in it.
async fn renew_batch(shared: Weak<Shared>, mut conn: Connection, batch: Vec<Renewal>) {
    let sent_at = LeaseInstant::now();
    let deadline = batch
        .iter()
        .map(|renewal| renewal.hold.valid_until())
        .min()
        .unwrap_or(sent_at);
    let (response_timeout, watch) = match shared.upgrade() {
        Some(shared) => (
            shared.settings.read().response_timeout,
            shared.loss_watch.get().map(|watch| watch.route().clone()),
        ),
        None => return,
    };
    // A batch holds one kind of renewal only (see `plan`): the first says which.
    let Some(HoldKind::Batched(kind)) = batch.first().map(|renewal| renewal.hold.kind.clone())
    else {
        return;
    };
    if let Some(native) = kind.native {
        let mut pipeline = redis::pipe();
        for renewal in &batch {
            native(
                &mut pipeline,
                &renewal.key.0,
                &renewal.key.1,
                renewal.lease_ms,
            );
        }
        let route = watch.filter(|_| kind.is_lock);
        let span = tracing::debug_span!("redlatch.renew", holds = batch.len(), kind = ?kind);
        let limit = deadline
            .saturating_duration_since(sent_at)
            .min(response_timeout)
            .max(Duration::from_millis(1));
        let send = renew_natively(pipeline, route, kind, &batch, conn, limit);
        let reply = tokio::time::timeout(limit, send).instrument(span).await;
        settle_reply(shared, &batch, sent_at, reply);
        return;
    }
    let mut invocation = kind.script.prepare_invoke();
    for renewal in &batch {
        (kind.add_hold)(
            &mut invocation,
            &renewal.key.0,
            &renewal.key.1,
            renewal.lease_ms,
        );
    }
    let span = tracing::debug_span!("redlatch.renew", holds = batch.len(), kind = ?kind);
    // Give up at the response timeout, or when the earliest lease runs out.
    let limit = deadline
        .saturating_duration_since(sent_at)
        .min(response_timeout)
        .max(Duration::from_millis(1));
    // Watched holds through the loss watch's connection, so that the
    // renewal costs the watch nothing (`engine/watched_renewals.rs`).
    let send = async {
        match watch.filter(|_| kind.is_lock) {
            Some(watch) => {
                let keys: Vec<Arc<str>> =
                    batch.iter().map(|renewal| renewal.key.0.clone()).collect();
                watch.renew(&invocation, &keys, &mut conn, limit).await
            }
            None => invocation.invoke_async::<Vec<i64>>(&mut conn).await,
        }
    };
    let reply = tokio::time::timeout(limit, send).instrument(span).await;
    settle_reply(shared, &batch, sent_at, reply);
}

/// A hold's place in a batch's per-hold outcome when its own renewal
/// failed (the server refused it, and no fallback renewed it): retried
/// soon, as a failed call is, the other holds of the batch settled by
/// their own answers.
pub(crate) const RENEWAL_FAILED: i64 = i64::MIN;

/// Sends a batch of plain renewal commands (one per hold): through the
/// loss watch's connection where it is open, as a transaction that tracks
/// the keys again (`engine/watched_renewals.rs`), else on `conn`. Per
/// hold, 1 renewed, 0 gone ([`crate::engine::hold_kind::NativeRenewal`]),
/// or [`RENEWAL_FAILED`]: each hold its own outcome.
///
/// A command the server refused for memory (`OOM`: Valkey refuses
/// `SET … IFEQ … PX` past `maxmemory`, though it only renews a key that is
/// there) is sent again as `kind`'s script, whose `PEXPIRE` runs under OOM
/// (and which runs as an `allow-oom` function). Without scripting that
/// fallback fails too, and the hold is retried until its lease runs out.
async fn renew_natively(
    pipeline: redis::Pipeline,
    route: Option<crate::engine::watched_renewals::WatchRoute>,
    kind: &'static BatchRenewal,
    batch: &[Renewal],
    mut conn: Connection,
    limit: Duration,
) -> redis::RedisResult<Vec<i64>> {
    let keys: Vec<Arc<str>> = batch.iter().map(|renewal| renewal.key.0.clone()).collect();
    let answers = match &route {
        Some(route) => route.renew_each(pipeline, &keys, &mut conn, limit).await?,
        None => {
            let mut pipeline = pipeline;
            pipeline
                .ignore_errors()
                .query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut conn)
                .await?
        }
    };
    let mut refused_for_memory = Vec::new();
    let mut outcome: Vec<i64> = answers
        .into_iter()
        .enumerate()
        .map(|(index, answer)| match answer {
            Ok(redis::Value::Nil) => 0,
            Ok(_) => 1,
            Err(error) if error.code() == Some("WRONGTYPE") => 0,
            Err(error) => {
                if error.code() == Some("OOM") {
                    refused_for_memory.push(index);
                }
                debug!(target: LOG_TARGET, key = %keys.get(index).map_or("", |key| &**key), %error, "redlatch: a hold's renewal refused");
                RENEWAL_FAILED
            }
        })
        .collect();
    if refused_for_memory.is_empty() {
        return Ok(outcome);
    }
    let mut invocation = kind.script.prepare_invoke();
    let mut script_keys = Vec::with_capacity(refused_for_memory.len());
    for &index in &refused_for_memory {
        if let Some(renewal) = batch.get(index) {
            (kind.add_hold)(
                &mut invocation,
                &renewal.key.0,
                &renewal.key.1,
                renewal.lease_ms,
            );
            script_keys.push(renewal.key.0.clone());
        }
    }
    let renewed = match &route {
        Some(route) => {
            route
                .renew(&invocation, &script_keys, &mut conn, limit)
                .await
        }
        None => invocation.invoke_async::<Vec<i64>>(&mut conn).await,
    };
    match renewed {
        Ok(renewed) => {
            for (&index, flag) in refused_for_memory.iter().zip(renewed) {
                if let Some(slot) = outcome.get_mut(index) {
                    *slot = flag;
                }
            }
        }
        Err(error) => {
            debug!(target: LOG_TARGET, %error, "redlatch: the script renewal after an OOM refusal failed too; retrying");
        }
    }
    Ok(outcome)
}

/// Counts one renewal call and applies its outcome.
fn settle_reply(
    shared: Weak<Shared>,
    batch: &[Renewal],
    sent_at: LeaseInstant,
    reply: Result<redis::RedisResult<Vec<i64>>, tokio::time::error::Elapsed>,
) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
    shared.renewal_round_trips.fetch_add(1, Ordering::Relaxed);
    let outcome = match reply {
        Ok(Ok(renewed)) => Ok(renewed),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => {
            Err("no answer within the response timeout or before the lease ran out".to_owned())
        }
    };
    // A failed renewal is retried soon: `settle` wakes the task for it.
    shared.settle(batch, sent_at, outcome);
}

/// Renews one hold that renews itself, bounded by its validity.
async fn renew_by_callback(shared: Weak<Shared>, renewal: Renewal) {
    let HoldKind::Callback(callback) = &renewal.hold.kind else {
        return;
    };
    let Some(callback): Option<Arc<dyn RenewNow>> = callback.upgrade() else {
        return;
    };
    let sent_at = LeaseInstant::now();
    let limit = renewal
        .hold
        .valid_until()
        .saturating_duration_since(sent_at)
        .max(Duration::from_millis(1));
    let outcome = match tokio::time::timeout(limit, callback.renew_now(renewal.lease_ms)).await {
        Ok(Renewed::Yes) => Ok(vec![1]),
        Ok(Renewed::Gone) => Ok(vec![0]),
        Ok(Renewed::Failed(error)) => Err(error),
        Err(_) => Err("no confirmation before the lease ran out".to_owned()),
    };
    let Some(shared) = shared.upgrade() else {
        return;
    };
    shared.settle(&[renewal], sent_at, outcome);
}

/// A force-unlock of this client under way (`Watchdog::force_unlocking`).
pub(crate) struct ForceUnlocking {
    shared: Arc<Shared>,
    key: Arc<str>,
}

impl Drop for ForceUnlocking {
    fn drop(&mut self) {
        let mut unlocking = self.shared.force_unlocking.lock();
        if let Some(calls) = unlocking.get_mut(&self.key) {
            *calls -= 1;
            if *calls == 0 {
                unlocking.remove(&self.key);
            }
        }
    }
}

/// The watchdog's holds as the loss watch sees them.
struct WatchedHolds(Weak<Shared>);

impl Holds for WatchedHolds {
    fn is_current(&self, hold: &Arc<Hold>) -> bool {
        self.0
            .upgrade()
            .is_some_and(|shared| shared.entries.lock().id_of(hold).is_some())
    }

    fn mark_gone(&self, hold: &Arc<Hold>) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let mut entries = shared.entries.lock();
        // Released or replaced meanwhile: nothing was lost.
        if let Some(id) = entries.id_of(hold) {
            warn!(target: LOG_TARGET, key = %hold.key, token = hold.token, "redlatch: the lock's key no longer carries this hold; hold lost");
            hold.mark_lost(shared.gone_reason(&hold.key));
            entries.remove_at(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::hold_kind::TEST_RENEWAL;
    use crate::scripts::Invocation;

    fn add_nothing(_: &mut Invocation, _: &str, _: &str, _: u64) {}

    /// Two more kinds of renewal, as two other primitives would have.
    static OTHER: BatchRenewal = BatchRenewal {
        name: "other",
        script: &crate::engine::hold_kind::TEST_RENEW,
        add_hold: add_nothing,
        is_lock: true,
        native: None,
        string_value: false,
        keeps_lease: false,
    };
    static PERMITS: BatchRenewal = BatchRenewal {
        name: "permits",
        script: &crate::engine::hold_kind::TEST_RENEW,
        add_hold: add_nothing,
        is_lock: false,
        native: None,
        string_value: false,
        keeps_lease: false,
    };

    struct Never;

    impl RenewNow for Never {
        fn renew_now(
            self: Arc<Self>,
            _: u64,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Renewed> + Send>> {
            Box::pin(async { Renewed::Failed("not in this test".to_owned()) })
        }
    }

    fn due(key: String, kind: HoldKind) -> Renewal {
        let owner: Arc<str> = Arc::from("client:owner");
        let key: Arc<str> = Arc::from(key);
        let hold = Arc::new(Hold::new(NewHold {
            key: key.clone(),
            owner: owner.clone(),
            kind,
            lease_ms: 30_000,
            renewed: true,
            token: 1,
            named_owner: false,
            sent_at: LeaseInstant::now(),
        }));
        Renewal {
            key: (key, owner),
            hold,
            lease_ms: 30_000,
            id: 0,
        }
    }

    fn kinds(batch: &[Renewal]) -> Vec<String> {
        let mut kinds: Vec<String> = batch
            .iter()
            .map(|renewal| format!("{:?}", renewal.hold.kind))
            .collect();
        kinds.dedup();
        kinds
    }

    /// One hold's renewal refused in a batch (the server answered it with
    /// an error the fallback could not mend) fails that hold's renewal
    /// alone: it is retried, the batch's other hold renewed, neither lost.
    /// (Before, one error failed the whole batch, and a hold whose own
    /// answer was not 1 was marked lost.)
    #[test]
    #[cfg(not(feature = "__permutation-checks"))]
    fn a_hold_refused_in_a_batch_is_retried_and_the_others_renewed() {
        const LEASE_MS: u64 = 30_000;
        let settings = Arc::new(crate::sync::unpoisoned::RwLock::new(Arc::new(
            crate::settings::Settings::default(),
        )));
        let dog = Watchdog {
            shared: Arc::new(Shared::new(settings)),
        };
        let now = LeaseInstant::now();
        let mut held = Vec::new();
        for (key, token) in [("first", 1), ("second", 2)] {
            held.push(dog.register(NewHold {
                key: Arc::from(key),
                owner: Arc::from("client:worker"),
                kind: HoldKind::Batched(&TEST_RENEWAL),
                lease_ms: LEASE_MS,
                renewed: true,
                token,
                named_owner: true,
                sent_at: now,
            }));
        }
        let due = dog.shared.sweep(now + renewal_period(LEASE_MS));
        assert_eq!(due.len(), 2);
        let refused = due
            .iter()
            .position(|renewal| &*renewal.key.0 == "second")
            .unwrap();
        let outcome = (0..due.len())
            .map(|index| if index == refused { RENEWAL_FAILED } else { 1 })
            .collect();
        let sent_at = LeaseInstant::now();
        dog.shared.settle(&due, sent_at, Ok(outcome));
        for hold in &held {
            assert!(!hold.is_marked_lost(), "a hold of the batch was lost");
        }
        assert_eq!(dog.held_count(), 2);
        // The refused hold is due again soon (a retry), the renewed one a
        // renewal period after the renewal.
        let soon = dog.shared.sweep(sent_at + retry_delay(LEASE_MS));
        let again: Vec<&str> = soon.iter().map(|renewal| &*renewal.key.0).collect();
        assert_eq!(again, ["second"]);
    }

    /// 10,000 renewed holds, 100 of them due: a sweep visits those 100,
    /// not every hold (it walked all of them at every wake-up: work per
    /// renewal period quadratic in the holds). The next wake-up is then the
    /// next hold due, read without a walk.
    #[test]
    // Under the permutation checks the mutex is shuttle's: it runs there only.
    #[cfg(not(feature = "__permutation-checks"))]
    fn a_sweep_visits_the_due_holds_and_no_others() {
        let settings = Arc::new(crate::sync::unpoisoned::RwLock::new(Arc::new(
            crate::settings::Settings::default(),
        )));
        let dog = Watchdog {
            shared: Arc::new(Shared::new(settings)),
        };
        let now = LeaseInstant::now();
        let period = renewal_period(30_000);
        let mut guards = Vec::new();
        for i in 0..10_000 {
            // The first 100 were confirmed a period ago: due now.
            let sent_at = if i < 100 { now - period } else { now };
            guards.push(dog.register(NewHold {
                key: Arc::from(format!("lock:{i}")),
                owner: Arc::from("client:owner"),
                kind: HoldKind::Batched(&TEST_RENEWAL),
                lease_ms: 30_000,
                renewed: true,
                token: 1,
                named_owner: false,
                sent_at,
            }));
        }
        SWEPT.with(|swept| swept.set(0));
        let due = dog.shared.sweep(now);
        let swept = SWEPT.with(std::cell::Cell::get);
        assert_eq!(due.len(), 100, "the holds due now");
        assert!(swept <= 200, "a sweep for 100 due holds visited {swept}");
        assert_eq!(
            dog.shared.next_due(),
            Some(now + period),
            "the next one due"
        );
        assert_eq!(dog.held_count(), 10_000);
        dog.shared.entries.lock().check();
    }

    #[test]
    fn one_call_per_script_and_slot_with_at_most_a_batch_each() {
        let never: Arc<dyn RenewNow> = Arc::new(Never);
        let mut due_now = Vec::new();
        // Two slots on a cluster: `{a}` and `{b}`.
        for slot in ["a", "b"] {
            for i in 0..150 {
                due_now.push(due(
                    format!("{{{slot}}}lock:{i}"),
                    HoldKind::Batched(&TEST_RENEWAL),
                ));
                due_now.push(due(
                    format!("{{{slot}}}permits:{i}:timeout"),
                    HoldKind::Batched(&PERMITS),
                ));
            }
            due_now.push(due(format!("{{{slot}}}rw"), HoldKind::Batched(&OTHER)));
        }
        due_now.push(due(
            "redlock".to_owned(),
            HoldKind::Callback(Arc::downgrade(&never)),
        ));

        let (batched, callbacks) = plan(due_now.clone(), true);
        assert_eq!(callbacks.len(), 1, "a Redlock hold renews itself");
        // Per slot: 150 locks (2 calls), 150 permits (2 calls), 1 read (1 call).
        assert_eq!(batched.len(), 2 * (2 + 2 + 1));
        for batch in &batched {
            assert!(batch.len() <= RENEW_BATCH);
            assert_eq!(kinds(batch).len(), 1, "a call mixes scripts");
            let slots: std::collections::HashSet<u16> = batch
                .iter()
                .map(|renewal| crate::scripts::keys::slot(&renewal.key.0))
                .collect();
            assert_eq!(slots.len(), 1, "a call spans slots");
        }

        // One server: slots do not matter, scripts still do.
        let (batched, _) = plan(due_now, false);
        assert_eq!(batched.len(), 3 + 3 + 1);
        assert!(batched.iter().all(|batch| kinds(batch).len() == 1));
    }
}

/// The watchdog's bookkeeping under every interleaving of guards joining
/// and leaving, replies registering, and renewals being planned and settled
/// (docs/TESTING.md, "Permutation checks"). Redis is one flag per hold: a
/// renewal reads it when it "runs".
#[cfg(all(test, feature = "__permutation-checks"))]
mod permutation_checks {
    use shuttle::thread;

    use super::*;
    use crate::sync::AtomicBool;
    use crate::sync::permutations::explore;

    const KEY: &str = "checked";
    const OWNER: &str = "client:worker";
    const LEASE_MS: u64 = 30_000;

    /// A watchdog with no task: the checks plan and settle renewals.
    fn watchdog() -> Arc<Watchdog> {
        let settings = Arc::new(crate::sync::unpoisoned::RwLock::new(Arc::new(
            crate::settings::Settings::default(),
        )));
        Arc::new(Watchdog {
            shared: Arc::new(Shared::new(settings)),
        })
    }

    fn reply(token: u64, renewed: bool, sent_at: LeaseInstant) -> NewHold {
        NewHold {
            key: Arc::from(KEY),
            owner: Arc::from(OWNER),
            kind: HoldKind::Batched(&crate::engine::hold_kind::TEST_RENEWAL),
            lease_ms: LEASE_MS,
            renewed,
            token,
            named_owner: true,
            sent_at,
        }
    }

    /// Registers two replies from two threads, in an order the schedule picks.
    fn register_both(
        dog: &Arc<Watchdog>,
        first: NewHold,
        second: NewHold,
    ) -> (Arc<Hold>, Arc<Hold>) {
        let spawn = |reply: NewHold| {
            let dog = dog.clone();
            thread::spawn(move || dog.register(reply))
        };
        let (first, second) = (spawn(first), spawn(second));
        (first.join().unwrap(), second.join().unwrap())
    }

    /// One renewal as the task does it: planned when due, run against
    /// Redis (`in_redis`), settled. Returns whether the hold was planned.
    fn renew_once(dog: &Watchdog, in_redis: &AtomicBool) -> bool {
        let later = LeaseInstant::now() + renewal_period(LEASE_MS);
        let due = dog.shared.sweep(later);
        let planned = !due.is_empty();
        let sent_at = LeaseInstant::now();
        let outcome = due
            .iter()
            .map(|_| i64::from(in_redis.load(Ordering::Acquire)))
            .collect();
        dog.shared.settle(&due, sent_at, Ok(outcome));
        planned
    }

    /// Two acquires of one named owner left in one batch: one fresh, one a
    /// re-entry, same token; their replies register in either order. Both
    /// guards share one live hold with two guards. (Before: the fresh reply
    /// seen second marked the hold the re-entry had joined lost.)
    /// A renewal settled while the task plans its sleep is never slept
    /// past: either the plan saw it, or the task finds a wake-up when it
    /// parks. (Settling wakes the task only for a hold due before the
    /// plan; a plan read before the settle must not hide it.)
    fn a_settled_renewal_is_never_slept_past() {
        let dog = watchdog();
        let hold = dog.register(reply(7, true, LeaseInstant::now()));
        // A renewal on its way, and a plan from before it (the task swept).
        let due = dog
            .shared
            .sweep(LeaseInstant::now() + renewal_period(LEASE_MS));
        assert_eq!(due.len(), 1);
        let shared = dog.shared.clone();
        shared
            .next_wake_ns
            .store(shared.ns(LeaseInstant::now()), Ordering::Release);
        // The task took the wake-up the registration left.
        let _ = futures_util::FutureExt::now_or_never(shared.wake.notified());
        let planner = thread::spawn({
            let shared = shared.clone();
            move || shared.plan_wake(LeaseInstant::now() + Duration::from_secs(3_600))
        });
        let settler = thread::spawn({
            let shared = shared.clone();
            move || shared.settle(&due, LeaseInstant::now(), Ok(vec![1]))
        });
        settler.join().unwrap();
        let planned = planner.join().unwrap();
        let next_renewal = shared.entries.lock().iter().next().unwrap().next_renewal;
        let woken = futures_util::FutureExt::now_or_never(shared.wake.notified()).is_some();
        assert!(
            planned <= next_renewal || woken,
            "the task would sleep past a renewal settled while it planned"
        );
        drop(hold);
    }

    fn replies_of_one_acquisition_share_one_hold() {
        let dog = watchdog();
        let sent_at = LeaseInstant::now();
        let (fresh, reentry) =
            register_both(&dog, reply(7, true, sent_at), reply(7, false, sent_at));
        assert!(
            Arc::ptr_eq(&fresh, &reentry),
            "two holds for one acquisition"
        );
        assert!(
            !fresh.is_marked_lost(),
            "a guard of a held lock marked lost"
        );
        assert!(fresh.renewed(), "the watchdog guard's hold is not renewed");
        let entries = dog.shared.entries.lock();
        assert_eq!(entries.iter().count(), 1);
        assert_eq!(entries.iter().next().unwrap().guards, 2);
    }

    /// A release racing a renewal: the guard leaves, then the release runs
    /// in Redis; the renewal is planned, runs and settles at any point
    /// around them. Nothing was lost while a guard held it. (Before: a
    /// renewal that ran after the release marked the hold lost.)
    fn a_released_hold_is_never_counted_lost() {
        let dog = watchdog();
        let hold = dog.register(reply(7, true, LeaseInstant::now()));
        let in_redis = Arc::new(AtomicBool::new(true));
        let release = thread::spawn({
            let (dog, hold, in_redis) = (dog.clone(), hold.clone(), in_redis.clone());
            move || {
                dog.remove_guard(&hold, true);
                in_redis.store(false, Ordering::Release);
            }
        });
        let renewal = thread::spawn({
            let (dog, in_redis) = (dog.clone(), in_redis.clone());
            move || renew_once(&dog, &in_redis)
        });
        release.join().unwrap();
        renewal.join().unwrap();
        assert!(!hold.is_marked_lost(), "a released hold was counted lost");
        assert_eq!(dog.held_count(), 0);
    }

    /// A fixed-lease hold; a watchdog guard joins it (a re-entry) while a
    /// renewal is planned, and leaves again. While it lives the hold is
    /// renewed, and once it left the hold is not; no guard is lost.
    /// (Before: a hold kept the renewal mode of its first guard.)
    fn a_hold_is_renewed_while_a_watchdog_guard_lives() {
        let dog = watchdog();
        let hold = dog.register(reply(7, false, LeaseInstant::now()));
        let in_redis = Arc::new(AtomicBool::new(true));
        let joined = Arc::new(AtomicBool::new(false));
        let watched = thread::spawn({
            let (dog, hold, in_redis) = (dog.clone(), hold.clone(), in_redis.clone());
            move || {
                assert!(dog.add_guard(&hold, LeaseInstant::now(), LEASE_MS, true));
                let renewed = renew_once(&dog, &in_redis);
                assert!(
                    renewed,
                    "a watchdog guard lives, yet no renewal was planned"
                );
                dog.remove_guard(&hold, true);
            }
        });
        let fixed = thread::spawn({
            let (dog, hold, joined) = (dog.clone(), hold.clone(), joined.clone());
            move || {
                joined.store(
                    dog.add_guard(&hold, LeaseInstant::now(), 300, false),
                    Ordering::Release,
                );
            }
        });
        watched.join().unwrap();
        fixed.join().unwrap();
        assert!(joined.load(Ordering::Acquire));
        assert!(!hold.renewed(), "renewed after its watchdog guard left");
        assert!(!hold.is_marked_lost());
        assert!(
            !renew_once(&dog, &in_redis),
            "renewal planned with no watchdog guard"
        );
    }

    /// A re-entry reply (token 5) seen after the same owner's fresh
    /// acquisition (token 6) made once its old hold was force-unlocked
    /// elsewhere, in either order: the token-5 guard is lost, the token-6
    /// one holds, and no guard reports a token Redis did not give it.
    /// (Before: the late re-entry joined the token-6 hold.)
    fn a_late_reply_about_an_older_acquisition_is_lost() {
        let dog = watchdog();
        let sent_at = LeaseInstant::now();
        let (old, new) = register_both(&dog, reply(5, true, sent_at), reply(6, true, sent_at));
        assert_eq!((old.token, new.token), (5, 6));
        assert!(old.is_marked_lost(), "the older acquisition's guard holds");
        assert!(
            !new.is_marked_lost(),
            "the live acquisition's guard is lost"
        );
    }

    /// A reply for `key` (a hold of its own), sent at `sent_at`.
    fn reply_for(key: &str, token: u64, renewed: bool, sent_at: LeaseInstant) -> NewHold {
        NewHold {
            key: Arc::from(key),
            ..reply(token, renewed, sent_at)
        }
    }

    /// The index of holds by due time under any order of its changes: a
    /// sweep split into steps of one hold (the mutex let go between steps)
    /// whose renewals are then settled, while a guard is released (and the
    /// release runs in Redis), a new hold registers, a fixed-lease hold
    /// gains a watchdog guard, and the loss watch finds a hold gone. Every
    /// hold but the new one is due at the start. Afterwards every tracked
    /// hold sits in the index once and no later than it is due (so the
    /// task's plan sleeps past none), the released hold is untracked and not
    /// lost, the gone one is lost and untracked, the others held.
    fn the_index_keeps_every_hold_once_in_any_order() {
        let dog = watchdog();
        let due_now = LeaseInstant::now() - renewal_period(LEASE_MS);
        let released = dog.register(reply_for("released", 1, true, due_now));
        let reentered = dog.register(reply_for("reentered", 2, false, due_now));
        let gone = dog.register(reply_for("gone", 3, true, due_now));
        let released_in_redis = Arc::new(AtomicBool::new(true));
        let gone_in_redis = Arc::new(AtomicBool::new(true));
        let task = thread::spawn({
            let (dog, released_in_redis, gone_in_redis) = (
                dog.clone(),
                released_in_redis.clone(),
                gone_in_redis.clone(),
            );
            move || {
                let due = dog.shared.sweep_in_steps(LeaseInstant::now(), 1);
                let sent_at = LeaseInstant::now();
                let outcome = due
                    .iter()
                    .map(|renewal| {
                        i64::from(match &*renewal.key.0 {
                            "released" => released_in_redis.load(Ordering::Acquire),
                            "gone" => gone_in_redis.load(Ordering::Acquire),
                            _ => true,
                        })
                    })
                    .collect();
                dog.shared.settle(&due, sent_at, Ok(outcome));
            }
        });
        let release = thread::spawn({
            let (dog, released) = (dog.clone(), released.clone());
            move || {
                dog.remove_guard(&released, true);
                released_in_redis.store(false, Ordering::Release);
            }
        });
        let newcomer = thread::spawn({
            let dog = dog.clone();
            move || dog.register(reply_for("new", 4, true, LeaseInstant::now()))
        });
        let reentry = thread::spawn({
            let (dog, reentered) = (dog.clone(), reentered.clone());
            move || assert!(dog.add_guard(&reentered, LeaseInstant::now(), LEASE_MS, true))
        });
        let watch = thread::spawn({
            let (dog, gone) = (dog.clone(), gone.clone());
            move || {
                gone_in_redis.store(false, Ordering::Release);
                let holds = dog.holds_for_watch();
                holds.mark_gone(&gone);
            }
        });
        task.join().unwrap();
        release.join().unwrap();
        let new = newcomer.join().unwrap();
        reentry.join().unwrap();
        watch.join().unwrap();

        let entries = dog.shared.entries.lock();
        entries.check();
        assert!(
            !released.is_marked_lost(),
            "a released hold was counted lost"
        );
        assert!(gone.is_marked_lost(), "a hold gone from Redis still held");
        for hold in [&new, &reentered] {
            assert!(hold.is_held() && hold.renewed());
            assert!(
                entries
                    .get(&(hold.key.clone(), hold.owner.text()))
                    .is_some_and(|entry| Arc::ptr_eq(&entry.hold, hold))
            );
        }
        assert_eq!(entries.locks(), 2, "only the new and the re-entered hold");
    }

    /// A hold that becomes due while the task plans its sleep (`change`:
    /// a new hold registered, or a fixed-lease hold's first watchdog guard,
    /// both due now) is never slept past: the plan saw it, or the task
    /// finds a wake-up when it parks. One change per check: each must wake
    /// the task by itself.
    fn a_hold_due_while_the_task_plans_is_never_slept_past(
        change: fn(&Watchdog, &Arc<Hold>, LeaseInstant),
    ) {
        let dog = watchdog();
        let fixed = dog.register(reply_for("fixed", 1, false, LeaseInstant::now()));
        let shared = dog.shared.clone();
        // The task took the wake-up the registration left.
        let _ = futures_util::FutureExt::now_or_never(shared.wake.notified());
        let planner = thread::spawn({
            let shared = shared.clone();
            move || shared.plan_wake(LeaseInstant::now() + Duration::from_secs(3_600))
        });
        let due_now = LeaseInstant::now() - renewal_period(LEASE_MS);
        let changer = thread::spawn({
            let (dog, fixed) = (dog.clone(), fixed.clone());
            move || change(&dog, &fixed, due_now)
        });
        changer.join().unwrap();
        let planned = planner.join().unwrap();
        let woken = futures_util::FutureExt::now_or_never(shared.wake.notified()).is_some();
        let entries = shared.entries.lock();
        entries.check();
        let first_due = entries.earliest().unwrap();
        assert!(first_due <= due_now + renewal_period(LEASE_MS));
        assert!(
            planned <= first_due || woken,
            "the task would sleep past a hold that became due while it planned"
        );
    }

    fn registered(dog: &Watchdog, _: &Arc<Hold>, due_now: LeaseInstant) {
        // The guard lives on in the watchdog's entry.
        drop(dog.register(reply_for("new", 2, true, due_now)));
    }

    fn reentered_with_the_watchdog(dog: &Watchdog, fixed: &Arc<Hold>, due_now: LeaseInstant) {
        assert!(dog.add_guard(fixed, due_now, LEASE_MS, true));
    }

    #[test]
    fn permutation_the_index_keeps_every_hold_once_in_any_order() {
        explore(the_index_keeps_every_hold_once_in_any_order);
    }

    #[test]
    fn permutation_a_hold_registered_while_the_task_plans_is_never_slept_past() {
        explore(|| a_hold_due_while_the_task_plans_is_never_slept_past(registered));
    }

    #[test]
    fn permutation_a_hold_reentered_with_the_watchdog_while_the_task_plans_is_never_slept_past() {
        explore(|| {
            a_hold_due_while_the_task_plans_is_never_slept_past(reentered_with_the_watchdog)
        });
    }

    #[test]
    fn permutation_a_settled_renewal_is_never_slept_past() {
        explore(a_settled_renewal_is_never_slept_past);
    }

    #[test]
    fn permutation_replies_of_one_acquisition_share_one_hold() {
        explore(replies_of_one_acquisition_share_one_hold);
    }

    #[test]
    fn permutation_a_released_hold_is_never_counted_lost() {
        explore(a_released_hold_is_never_counted_lost);
    }

    #[test]
    fn permutation_a_hold_is_renewed_while_a_watchdog_guard_lives() {
        explore(a_hold_is_renewed_while_a_watchdog_guard_lives);
    }

    #[test]
    fn permutation_a_late_reply_about_an_older_acquisition_is_lost() {
        explore(a_late_reply_about_an_older_acquisition_is_lost);
    }
}

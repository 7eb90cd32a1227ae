//! The watchdog: one task per client that keeps every held lock alive.
//!
//! Each held lock is renewed at a third of its lease. Renewals due at about
//! the same time go out together, up to [`RENEW_BATCH`] locks per script
//! call, so 10,000 held locks cost about 100 round trips per period, not
//! 10,000. A renewal that finds the lock gone marks the hold lost at once; a
//! hold that could not be renewed before its lease (minus a drift margin) ran
//! out on the lease clock is marked lost then, even if Redis never
//! answered. Fixed-lease holds are not renewed, only marked lost when their
//! lease runs out.
//!
//! Holds of every kind are renewed here: the reentrant and fair locks and the
//! write side of read-write locks with `renew.lua`, read holds with
//! `rw_read_renew.lua`, which also extends their per-hold timeout keys.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, warn};

use crate::engine::hold::{Hold, HoldKind, LostReason, NewHold};
use crate::scripts;
use crate::scripts::keys::read_timeout_prefix;
use crate::settings::SharedSettings;
use crate::transport::Connection;

/// Most locks renewed by one script call.
pub const RENEW_BATCH: usize = 100;

type HoldKey = (String, Arc<str>);

/// One lock in a renewal batch, with the lease sent for it.
#[derive(Clone)]
struct Renewal {
    key: HoldKey,
    hold: Arc<Hold>,
    lease_ms: u64,
}

struct Entry {
    hold: Arc<Hold>,
    /// Guards alive for this hold (re-entries included).
    guards: usize,
    next_renewal: LeaseInstant,
    renewing: bool,
}

struct Shared {
    entries: Mutex<HashMap<HoldKey, Entry>>,
    settings: SharedSettings,
    wake: Notify,
    base: LeaseInstant,
    /// When the task plans to wake next, in ns after `base`.
    next_wake_ns: AtomicU64,
    renewal_round_trips: AtomicU64,
}

/// Handle to the client's watchdog task.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

/// A hold (a lock, a permit, a place in line) is renewed at a third of its lease.
pub(crate) fn renewal_period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).max(1))
}

impl Watchdog {
    pub(crate) fn start(
        conn: Connection,
        settings: SharedSettings,
        runtime: &tokio::runtime::Handle,
        shutdown: CancellationToken,
    ) -> Watchdog {
        let shared = Arc::new(Shared {
            entries: Mutex::new(HashMap::new()),
            settings,
            wake: Notify::new(),
            base: LeaseInstant::now(),
            next_wake_ns: AtomicU64::new(u64::MAX),
            renewal_round_trips: AtomicU64::new(0),
        });
        runtime.spawn(run(Arc::downgrade(&shared), conn, shutdown));
        Watchdog { shared }
    }

    /// Registers a guard for a fresh acquisition or a re-entry by a named
    /// owner, returning the hold the guard shares with its re-entries.
    pub(crate) fn register(&self, new: NewHold) -> Arc<Hold> {
        self.register_kind(new, HoldKind::Plain)
    }

    /// As [`Watchdog::register`], for a hold on a lock of another `kind`.
    pub(crate) fn register_kind(&self, new: NewHold, kind: HoldKind) -> Arc<Hold> {
        let key: HoldKey = (new.keys.key.clone(), new.owner.clone());
        let mut entries = self.shared.entries.lock();
        if let Some(entry) = entries.get_mut(&key)
            && !entry.hold.is_marked_lost()
        {
            if !new.fresh {
                entry.guards += 1;
                entry.hold.confirm(new.sent_at, new.lease_ms);
                return entry.hold.clone();
            }
            // Redis saw no hold of this owner: the one tracked here was lost
            // (force-unlocked elsewhere, expired) before a renewal noticed.
            // Its guards must not share the new acquisition's token.
            entry.hold.mark_lost(LostReason::Gone);
        }
        let next_renewal = new.sent_at + renewal_period(new.lease_ms);
        let renewed = new.renewed;
        let hold = Arc::new(Hold::new(new, kind));
        let due = if renewed {
            next_renewal.min(hold.valid_until())
        } else {
            hold.valid_until()
        };
        entries.insert(
            key,
            Entry {
                hold: hold.clone(),
                guards: 1,
                next_renewal,
                renewing: false,
            },
        );
        crate::metrics::held_locks(entries.len());
        drop(entries);
        self.shared.wake_if_before(due);
        hold
    }

    /// Adds a re-entered guard to an existing hold, whose re-entry request
    /// sent at `sent_at` set a lease of `lease_ms` (the lease sent, not the
    /// hold's current one: a renewal may have changed that meanwhile). False
    /// when the hold is no longer tracked (it was lost meanwhile).
    pub(crate) fn add_guard(&self, hold: &Arc<Hold>, sent_at: LeaseInstant, lease_ms: u64) -> bool {
        let key: HoldKey = (hold.keys.key.clone(), hold.owner.clone());
        let mut entries = self.shared.entries.lock();
        match entries.get_mut(&key) {
            Some(entry) if Arc::ptr_eq(&entry.hold, hold) && !hold.is_marked_lost() => {
                entry.guards += 1;
                hold.confirm(sent_at, lease_ms);
                true
            }
            _ => false,
        }
    }

    /// Drops one guard of `hold`; the last one stops the renewals.
    pub(crate) fn remove_guard(&self, hold: &Arc<Hold>) {
        let key: HoldKey = (hold.keys.key.clone(), hold.owner.clone());
        let mut entries = self.shared.entries.lock();
        if let Some(entry) = entries.get_mut(&key)
            && Arc::ptr_eq(&entry.hold, hold)
        {
            entry.guards -= 1;
            if entry.guards == 0 {
                entries.remove(&key);
                crate::metrics::held_locks(entries.len());
            }
        }
    }

    /// Marks every hold on `key` lost (this client force-unlocked it).
    pub(crate) fn mark_key_lost(&self, key: &str) {
        let mut entries = self.shared.entries.lock();
        entries.retain(|(entry_key, _), entry| {
            if entry_key == key {
                entry.hold.mark_lost(LostReason::ForceUnlocked);
                false
            } else {
                true
            }
        });
    }

    /// Brings every renewed hold's next renewal forward to now (the default
    /// lease changed: held locks should get it promptly).
    pub(crate) fn renew_all_soon(&self) {
        let now = LeaseInstant::now();
        for entry in self.shared.entries.lock().values_mut() {
            if entry.hold.renewed {
                entry.next_renewal = now;
            }
        }
        self.shared.wake.notify_one();
    }

    /// Holds currently tracked (one per owner and lock).
    pub(crate) fn held_count(&self) -> usize {
        self.shared.entries.lock().len()
    }

    /// Renewal script calls made so far.
    pub(crate) fn renewal_round_trips(&self) -> u64 {
        self.shared.renewal_round_trips.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn ns(&self, at: LeaseInstant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn wake_if_before(&self, due: LeaseInstant) {
        if self.ns(due) < self.next_wake_ns.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }

    /// Marks expired holds lost, and picks the renewals that are due (or
    /// nearly: renewing a little early lets more locks share a batch).
    fn sweep(&self, now: LeaseInstant) -> Vec<Renewal> {
        let mut due = Vec::new();
        let default_lease_ms = self.settings.read().default_lease.as_millis() as u64;
        let mut entries = self.entries.lock();
        entries.retain(|key, entry| {
            if entry.hold.is_marked_lost() {
                return false;
            }
            if now >= entry.hold.valid_until() {
                let reason = if entry.hold.renewed {
                    warn!(lock = %key.0, token = entry.hold.token, "redlatch: lease ran out before a renewal got through; lock lost");
                    LostReason::NotRenewed
                } else {
                    LostReason::LeaseRanOut
                };
                entry.hold.mark_lost(reason);
                return false;
            }
            let period = renewal_period(entry.hold.lease_ms());
            if entry.hold.renewed && !entry.renewing && entry.next_renewal <= now + period / 3 {
                entry.renewing = true;
                due.push(Renewal {
                    key: key.clone(),
                    hold: entry.hold.clone(),
                    // Renewed locks follow the live default lease.
                    lease_ms: default_lease_ms,
                });
            }
            true
        });
        crate::metrics::held_locks(entries.len());
        due
    }

    /// The next instant anything needs the task: a renewal or an expiry.
    fn next_due(&self) -> Option<LeaseInstant> {
        let entries = self.entries.lock();
        entries
            .values()
            .map(|entry| {
                if entry.hold.renewed && !entry.renewing {
                    entry.next_renewal.min(entry.hold.valid_until())
                } else {
                    entry.hold.valid_until()
                }
            })
            .min()
    }

    /// Applies the outcome of one renewal batch.
    fn settle(&self, batch: &[Renewal], sent_at: LeaseInstant, outcome: Result<Vec<i64>, String>) {
        let now = LeaseInstant::now();
        let mut entries = self.entries.lock();
        match &outcome {
            Ok(renewed) => {
                crate::metrics::renewed(renewed.iter().filter(|flag| **flag == 1).count() as u64)
            }
            Err(_) => crate::metrics::renewal_failed(batch.len() as u64),
        }
        for (
            index,
            Renewal {
                key,
                hold,
                lease_ms,
            },
        ) in batch.iter().enumerate()
        {
            let current = entries
                .get_mut(key)
                .filter(|entry| Arc::ptr_eq(&entry.hold, hold));
            match &outcome {
                Ok(renewed) if renewed.get(index) == Some(&1) => {
                    hold.confirm(sent_at, *lease_ms);
                    if let Some(entry) = current {
                        entry.renewing = false;
                        entry.next_renewal = sent_at + renewal_period(*lease_ms);
                    }
                }
                Ok(_) => {
                    warn!(lock = %key.0, token = hold.token, "redlatch: renewal found the lock gone; lock lost");
                    hold.mark_lost(LostReason::Gone);
                    if current.is_some() {
                        entries.remove(key);
                    }
                }
                Err(error) => {
                    debug!(lock = %key.0, %error, "redlatch: renewal failed, retrying");
                    if let Some(entry) = current {
                        entry.renewing = false;
                        let retry = (renewal_period(hold.lease_ms()) / 3)
                            .clamp(Duration::from_millis(10), Duration::from_secs(1));
                        entry.next_renewal = now + retry;
                    }
                }
            }
        }
    }
}

async fn run(shared: Weak<Shared>, conn: Connection, shutdown: CancellationToken) {
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let next = strong.next_due();
        let next_ns = next.map_or(u64::MAX, |at| strong.ns(at));
        strong.next_wake_ns.store(next_ns, Ordering::Release);
        let sleep_for = next.map_or(Duration::from_secs(3600), |at| {
            at.saturating_duration_since(LeaseInstant::now())
        });
        {
            let notified = strong.wake.notified();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = notified => {}
                _ = tokio::time::sleep(sleep_for) => {}
            }
        }
        let due = strong.sweep(LeaseInstant::now());
        // Read holds of read-write locks renew their timeout keys too: another script.
        let (reads, hashes): (Vec<Renewal>, Vec<Renewal>) = due
            .into_iter()
            .partition(|renewal| renewal.hold.kind.is_read());
        let cluster = conn.is_cluster();
        for batch in batches(hashes, cluster, lock_key)
            .into_iter()
            .chain(batches(reads, cluster, lock_key))
        {
            let shared = Arc::downgrade(&strong);
            let conn = conn.clone();
            tokio::spawn(renew_batch(shared, conn, batch));
        }
        drop(strong);
    }
}

/// Splits due renewals into script calls of at most [`RENEW_BATCH`] entries.
/// On a cluster one call may only touch keys of one hash slot, so renewals
/// are grouped by the slot of `key` first. Every batched renewal (locks,
/// permits) is split here.
pub(crate) fn batches<T: Clone>(
    mut due: Vec<T>,
    cluster: bool,
    key: impl Fn(&T) -> &str,
) -> Vec<Vec<T>> {
    if !cluster {
        return due.chunks(RENEW_BATCH).map(<[T]>::to_vec).collect();
    }
    due.sort_by_cached_key(|entry| crate::scripts::keys::slot(key(entry)));
    due.chunk_by(|a, b| crate::scripts::keys::slot(key(a)) == crate::scripts::keys::slot(key(b)))
        .flat_map(|same_slot| same_slot.chunks(RENEW_BATCH))
        .map(<[T]>::to_vec)
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
    let response_timeout = match shared.upgrade() {
        Some(shared) => shared.settings.read().response_timeout,
        None => return,
    };
    // A batch holds one kind of renewal only (see `run`).
    let reads = batch
        .first()
        .is_some_and(|renewal| renewal.hold.kind.is_read());
    let mut invocation = if reads {
        crate::scripts::RW_READ_RENEW.prepare_invoke()
    } else {
        scripts::RENEW.prepare_invoke()
    };
    for renewal in &batch {
        invocation.key(&renewal.key.0);
        invocation.arg(&*renewal.key.1).arg(renewal.lease_ms);
        if reads {
            invocation.arg(read_timeout_prefix(&renewal.key.0, &renewal.key.1));
        }
    }
    let span = tracing::debug_span!("redlatch.renew", locks = batch.len());
    // Give up at the response timeout, or when the earliest lease runs out.
    let limit = deadline
        .saturating_duration_since(sent_at)
        .min(response_timeout)
        .max(Duration::from_millis(1));
    let reply = tokio::time::timeout(limit, invocation.invoke_async::<Vec<i64>>(&mut conn))
        .instrument(span)
        .await;
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
    shared.settle(&batch, sent_at, outcome);
    // A failed renewal must be retried soon and an expiry noticed on time.
    shared.wake.notify_one();
}

/// The key a lock renewal touches: its batch's slot.
fn lock_key(renewal: &Renewal) -> &str {
    &renewal.key.0
}

//! The renewal of expirable permits: one task per client keeps every permit
//! its guards hold alive, and tells a guard when its permit is gone.
//!
//! The watchdog's rhythm for locks: each permit is renewed at a third of its
//! lease, permits due at about the same time go out together (up to
//! [`RENEW_BATCH`](crate::RENEW_BATCH) per script call), and a permit whose lease (minus the drift
//! margin) runs out on the lease clock before a renewal got through is
//! marked lost. The task lives while any permit of its client is held.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, Weak};
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::engine::Core;
use crate::engine::hold::LostReason;
use crate::engine::renewal::batches;
use crate::scripts;
use crate::scripts::keys::SemaphoreKeys;
use crate::settings::limits;

/// One held permit: what its guard and the keeper share.
pub(crate) struct PermitHold {
    pub(crate) keys: Arc<SemaphoreKeys>,
    pub(crate) id: Arc<str>,
    pub(crate) renewed: bool,
    pub(crate) lease_ms: AtomicU64,
    pub(crate) lost: CancellationToken,
    pub(crate) reason: OnceLock<LostReason>,
    /// Until when the permit can be trusted (lease clock).
    pub(crate) valid_until: Mutex<LeaseInstant>,
}

impl PermitHold {
    pub(crate) fn new(
        keys: Arc<SemaphoreKeys>,
        id: Arc<str>,
        renewed: bool,
        lease_ms: u64,
        sent_at: LeaseInstant,
    ) -> PermitHold {
        PermitHold {
            keys,
            id,
            renewed,
            lease_ms: AtomicU64::new(lease_ms),
            lost: CancellationToken::new(),
            reason: OnceLock::new(),
            valid_until: Mutex::new(sent_at + limits::validity(lease_ms)),
        }
    }

    /// Records a renewal of `lease_ms` sent at `sent_at`. One keeper renews
    /// a permit one call at a time, so replies never arrive out of order and
    /// a shorter lease (live settings) shortens the deadline too.
    fn confirm(&self, sent_at: LeaseInstant, lease_ms: u64) {
        self.lease_ms.store(lease_ms, Ordering::Release);
        *self.valid_until.lock() = sent_at + limits::validity(lease_ms);
    }

    pub(crate) fn mark_lost(&self, reason: LostReason) {
        let _ = self.reason.set(reason);
        self.lost.cancel();
    }
}

/// The renewal task of one client's permits, alive while any permit is held.
pub(crate) struct Keeper {
    pub(crate) core: Arc<Core>,
    entries: Mutex<HashMap<u64, Entry>>,
    next_slot: AtomicU64,
    wake: Arc<Notify>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Let the task see that it has nothing left to keep, and end.
        self.wake.notify_one();
    }
}

struct Entry {
    hold: Arc<PermitHold>,
    next_renewal: LeaseInstant,
    renewing: bool,
}

/// The keepers of live clients, by client id. A keeper is dropped (and its
/// task ends) when the last permit it keeps is released.
static KEEPERS: LazyLock<Mutex<HashMap<Uuid, Weak<Keeper>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn renewal_period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).max(1))
}

impl Keeper {
    /// The keeper of `client`'s permits, started if it has none.
    pub(crate) fn of(core: &Arc<Core>) -> Arc<Keeper> {
        let mut keepers = KEEPERS.lock();
        if let Some(keeper) = keepers.get(&core.id).and_then(Weak::upgrade) {
            return keeper;
        }
        keepers.retain(|_, keeper| keeper.strong_count() > 0);
        let keeper = Arc::new(Keeper {
            core: core.clone(),
            entries: Mutex::new(HashMap::new()),
            next_slot: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
        });
        keepers.insert(core.id, Arc::downgrade(&keeper));
        core.runtime
            .spawn(run(Arc::downgrade(&keeper), keeper.wake.clone()));
        keeper
    }

    pub(crate) fn track(&self, hold: Arc<PermitHold>) -> u64 {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let next_renewal =
            LeaseInstant::now() + renewal_period(hold.lease_ms.load(Ordering::Acquire));
        self.entries.lock().insert(
            slot,
            Entry {
                hold,
                next_renewal,
                renewing: false,
            },
        );
        self.wake.notify_one();
        slot
    }

    pub(crate) fn untrack(&self, slot: u64) {
        self.entries.lock().remove(&slot);
    }

    /// The next instant anything needs the task.
    fn next_due(&self) -> Option<LeaseInstant> {
        self.entries
            .lock()
            .values()
            .map(|entry| {
                let until = *entry.hold.valid_until.lock();
                if entry.hold.renewed && !entry.renewing {
                    entry.next_renewal.min(until)
                } else {
                    until
                }
            })
            .min()
    }

    /// Marks expired permits lost and picks the renewals due (or nearly).
    fn sweep(&self, now: LeaseInstant) -> Vec<(u64, Arc<PermitHold>)> {
        let mut due = Vec::new();
        self.entries.lock().retain(|slot, entry| {
            if now >= *entry.hold.valid_until.lock() {
                entry.hold.mark_lost(if entry.hold.renewed {
                    LostReason::NotRenewed
                } else {
                    LostReason::LeaseRanOut
                });
                return false;
            }
            let period = renewal_period(entry.hold.lease_ms.load(Ordering::Acquire));
            if entry.hold.renewed && !entry.renewing && entry.next_renewal <= now + period / 3 {
                entry.renewing = true;
                due.push((*slot, entry.hold.clone()));
            }
            true
        });
        due
    }

    /// Renews one batch; marks permits found gone lost.
    async fn renew(&self, batch: &[(u64, Arc<PermitHold>)]) {
        let settings = self.core.current_settings();
        let lease_ms = settings.default_lease.as_millis() as u64;
        let mut invocation = scripts::PERMIT_RENEW.prepare_invoke();
        for (_, hold) in batch {
            invocation.key(&hold.keys.timeouts);
            invocation.arg(&*hold.id).arg(lease_ms);
        }
        let sent_at = LeaseInstant::now();
        let earliest = batch
            .iter()
            .map(|(_, hold)| *hold.valid_until.lock())
            .min()
            .unwrap_or(sent_at);
        // Give up at the response timeout, or when the earliest lease runs out.
        let limit = earliest
            .saturating_duration_since(sent_at)
            .min(settings.response_timeout)
            .max(Duration::from_millis(1));
        let mut conn = self.core.conn.clone();
        let reply =
            tokio::time::timeout(limit, invocation.invoke_async::<Vec<i64>>(&mut conn)).await;
        let now = LeaseInstant::now();
        let mut entries = self.entries.lock();
        for (index, (slot, hold)) in batch.iter().enumerate() {
            match &reply {
                Ok(Ok(renewed)) if renewed.get(index) == Some(&1) => {
                    hold.confirm(sent_at, lease_ms);
                    if let Some(entry) = entries.get_mut(slot) {
                        entry.renewing = false;
                        entry.next_renewal = sent_at + renewal_period(lease_ms);
                    }
                }
                Ok(Ok(_)) => {
                    tracing::warn!(semaphore = %hold.keys.key, id = %hold.id, "redlatch: renewal found the permit gone; permit lost");
                    hold.mark_lost(LostReason::Gone);
                    entries.remove(slot);
                }
                _ => {
                    // Retry soon; the sweep marks it lost if its lease runs out first.
                    if let Some(entry) = entries.get_mut(slot) {
                        entry.renewing = false;
                        let retry = (renewal_period(lease_ms) / 3)
                            .clamp(Duration::from_millis(10), Duration::from_secs(1));
                        entry.next_renewal = now + retry;
                    }
                }
            }
        }
    }
}

/// The keeper's task: sleeps until the next renewal or expiry, then handles
/// what is due. Ends when the keeper is dropped.
async fn run(keeper: Weak<Keeper>, wake: Arc<Notify>) {
    loop {
        let next = match keeper.upgrade() {
            Some(keeper) => keeper.next_due(),
            None => return,
        };
        let sleep_for = next.map_or(Duration::from_secs(3600), |at| {
            at.saturating_duration_since(LeaseInstant::now())
        });
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(sleep_for) => {}
        }
        let Some(strong) = keeper.upgrade() else {
            return;
        };
        let due = strong.sweep(LeaseInstant::now());
        // One call per slot on a cluster: permits of other semaphores live elsewhere.
        let cluster = strong.core.conn.is_cluster();
        for batch in batches(due, cluster, |(_, hold)| hold.keys.timeouts.as_str()) {
            strong.renew(&batch).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_at_a_third_of_the_lease() {
        assert_eq!(renewal_period(30_000), Duration::from_secs(10));
        assert_eq!(renewal_period(1), Duration::from_millis(1));
    }
}

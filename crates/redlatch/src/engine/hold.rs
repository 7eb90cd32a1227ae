//! One hold renewed by the client's watchdog: a lock held by one owner, an
//! expirable permit, or a Redlock hold. Its guards and the watchdog share it.

use std::sync::Arc;

use crate::sync::{AtomicU8, AtomicU32, Mutex, Ordering};

use crate::lease_clock::LeaseInstant;

use tokio::sync::Notify;

use crate::engine::hold_kind::{HoldKind, KindOfHold};
use crate::engine::key_text::KeyText;
use crate::engine::owner_field::{OwnerField, OwnerPrefix};
use crate::engine::reread::Pacing;
use crate::settings::limits;

/// What a new acquisition tells the watchdog.
pub(crate) struct NewHold {
    /// The key a renewal touches: the lock hash, or the semaphore's expiries.
    pub(crate) key: Arc<str>,
    /// The lock hash field (`<client-uuid>:<owner>`), or the permit id.
    pub(crate) owner: Arc<str>,
    pub(crate) kind: HoldKind,
    pub(crate) lease_ms: u64,
    /// The guard asks for renewal by the watchdog (true) or keeps a fixed
    /// lease that runs out (false).
    pub(crate) renewed: bool,
    /// The fencing token (0 for a permit).
    pub(crate) token: u64,
    /// True when the owner was named by the caller (not unique to one acquire).
    pub(crate) named_owner: bool,
    /// When the acquiring request was sent: validity counts from here.
    pub(crate) sent_at: LeaseInstant,
}

/// What Redis confirmed of a hold's lease (and who waits for its loss).
#[derive(Debug)]
struct Confirmed {
    /// Until when the hold can be trusted: the latest `sent_at + validity(lease)`
    /// of every confirmed request. Sound whatever order Redis ran them in,
    /// because no script ever shortens a lease already set (docs/SAFETY.md,
    /// invariant (b)): each request left the key's expiry at least its
    /// `sent_at + lease`, and none took any of that back.
    valid_until: LeaseInstant,
    /// The confirmed request sent last, and its lease: what
    /// [`Hold::lease_ms`] reports and the next renewal is planned from.
    last_sent: LeaseInstant,
    lease_ms: u64,
    /// Wakes whoever waits for the hold to be lost: made by the first
    /// waiter (most holds never have one, and a client may hold many
    /// thousands), under this mutex, which the marking takes too.
    lost: Option<Arc<Notify>>,
}

/// The shared state of one hold. Re-entered guards of the same owner share
/// one `Hold`; the watchdog renews it and marks it lost.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The lock's key (the semaphore's expiries for a permit): inline when
    /// short (`engine/key_text.rs`).
    pub(crate) key: KeyText,
    /// The lock hash field or permit id; an anonymous owner of the client
    /// kept as its number.
    pub(crate) owner: OwnerField,
    pub(crate) token: u64,
    pub(crate) named_owner: bool,
    /// One word: a callback is kept by the watchdog, beside the hold's entry.
    pub(crate) kind: KindOfHold,
    /// Live guards that asked for renewal: while there is one, the watchdog
    /// renews the hold, whatever lease the other guards asked for.
    renewing_guards: AtomicU32,
    /// Where the watchdog tracks it (`engine/schedule.rs`): set under the
    /// watchdog's lock, and read under it. Once the hold is no longer
    /// tracked the id may name another hold: the watchdog checks.
    entry: AtomicU32,
    confirmed: Mutex<Confirmed>,
    /// Set once, when the hold is marked lost: why ([`LostReason::code`];
    /// 0 while not marked). One byte, not a `OnceLock` of 8: every held
    /// lock has one.
    lost_reason: AtomicU8,
    /// How soon the loss watch reads the key again after an invalidation
    /// ([`Pacing`]'s parts, read and written by the watch's task alone):
    /// kept here, in room the hold had spare (its size stays 136), not in
    /// a slot of the watch's table. Three fields, not one of a struct,
    /// which would be padded to 8 bytes.
    pace_read_at: AtomicU32,
    pace_strikes: AtomicU8,
    pace_failures: AtomicU8,
}

impl Hold {
    /// The hold of one new guard (which asked for renewal or not).
    pub(crate) fn new(new: NewHold) -> Hold {
        Hold::with_prefix(new, None)
    }

    /// The same, its owner kept as a number when it is one of `prefix`'s
    /// anonymous owners (`engine/owner_field.rs`).
    pub(crate) fn with_prefix(new: NewHold, prefix: Option<&OwnerPrefix>) -> Hold {
        Hold {
            kind: KindOfHold::of(&new.kind),
            key: KeyText::new(new.key),
            owner: OwnerField::new(new.owner, prefix),
            token: new.token,
            named_owner: new.named_owner,
            renewing_guards: AtomicU32::new(u32::from(new.renewed)),
            entry: AtomicU32::new(u32::MAX),
            confirmed: Mutex::new(Confirmed {
                valid_until: new.sent_at + limits::validity(new.lease_ms),
                last_sent: new.sent_at,
                lease_ms: new.lease_ms,
                lost: None,
            }),
            lost_reason: AtomicU8::new(0),
            pace_read_at: AtomicU32::new(0),
            pace_strikes: AtomicU8::new(0),
            pace_failures: AtomicU8::new(0),
        }
    }

    /// Takes `step` on the loss watch's re-read pace of this hold; what it
    /// returns. Only the watch's task paces a hold: a load, a step and a
    /// store make no race.
    pub(crate) fn pace<R>(&self, step: impl FnOnce(&mut Pacing) -> R) -> R {
        let mut pacing = Pacing::of_parts((
            self.pace_read_at.load(Ordering::Relaxed),
            self.pace_strikes.load(Ordering::Relaxed),
            self.pace_failures.load(Ordering::Relaxed),
        ));
        let result = step(&mut pacing);
        let (read_at, strikes, failures) = pacing.parts();
        self.pace_read_at.store(read_at, Ordering::Relaxed);
        self.pace_strikes.store(strikes, Ordering::Relaxed);
        self.pace_failures.store(failures, Ordering::Relaxed);
        result
    }

    /// Where the watchdog last tracked this hold (`u32::MAX`: never).
    pub(crate) fn entry(&self) -> usize {
        self.entry.load(Ordering::Relaxed) as usize
    }

    /// Records where the watchdog tracks this hold (under its lock).
    pub(crate) fn set_entry(&self, id: usize) {
        // Ids are slab positions: far fewer than 2³² holds at once.
        self.entry
            .store(u32::try_from(id).unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// The lease of the confirmed request sent last.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.confirmed.lock().lease_ms
    }

    /// True while a live guard of the hold asked for renewal.
    pub(crate) fn renewed(&self) -> bool {
        self.renewing_guards.load(Ordering::Acquire) > 0
    }

    /// A guard joins (true) or leaves (false) the hold; `renewed`: whether
    /// it asked for renewal. Called under the watchdog's lock.
    pub(crate) fn count_guard(&self, renewed: bool, joins: bool) {
        if !renewed {
            return;
        }
        if joins {
            self.renewing_guards.fetch_add(1, Ordering::AcqRel);
        } else {
            let _ =
                self.renewing_guards
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                        count.checked_sub(1)
                    });
        }
    }

    /// Records that Redis confirmed a lease of `lease_ms` for a request sent
    /// at `sent_at` (acquire, re-entry or renewal). Replies may be seen in
    /// any order, and Redis may have run the requests in another order than
    /// they were sent (a script re-sent after NOSCRIPT runs late): since no
    /// script shortens a lease, the hold is valid until the latest end any
    /// confirmed request guarantees.
    pub(crate) fn confirm(&self, sent_at: LeaseInstant, lease_ms: u64) {
        let mut confirmed = self.confirmed.lock();
        confirmed.valid_until = confirmed
            .valid_until
            .max(sent_at + limits::validity(lease_ms));
        if sent_at >= confirmed.last_sent {
            confirmed.last_sent = sent_at;
            confirmed.lease_ms = lease_ms;
        }
    }

    /// Until when the lock can be trusted (lease clock).
    pub(crate) fn valid_until(&self) -> LeaseInstant {
        self.confirmed.lock().valid_until
    }

    /// True while not marked lost and the lease has not run out.
    pub(crate) fn is_held(&self) -> bool {
        !self.is_marked_lost() && LeaseInstant::now() < self.valid_until()
    }

    /// Marks the hold lost (the first reason sticks).
    pub(crate) fn mark_lost(&self, reason: LostReason) {
        // Permits are not locks: the metric counts lost locks only.
        let first = self
            .lost_reason
            .compare_exchange(0, reason.code(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first && self.kind.counts_as_lock() {
            crate::engine::metrics::lock_lost(reason.label());
        }
        // A waiter that made its `Notified` before this lock is woken; one
        // that locks after it sees the reason set above.
        let lost = self.confirmed.lock().lost.clone();
        if let Some(lost) = lost {
            lost.notify_waiters();
        }
    }

    pub(crate) fn is_marked_lost(&self) -> bool {
        self.lost_reason.load(Ordering::Acquire) != 0
    }

    /// Resolves once the hold is marked lost.
    pub(crate) async fn until_marked_lost(self: Arc<Hold>) {
        let lost = self
            .confirmed
            .lock()
            .lost
            .get_or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        loop {
            // Made before the check: `notify_waiters` wakes every
            // `Notified` made before it, polled or not, so a mark in
            // between still wakes it (and a mark before is seen below).
            let notified = lost.notified();
            if self.is_marked_lost() {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        if let Some(reason) = LostReason::of_code(self.lost_reason.load(Ordering::Acquire)) {
            return Some(reason);
        }
        // Not marked yet, but the deadline has passed: the watchdog will say so at its next tick.
        (LeaseInstant::now() >= self.valid_until()).then_some(if self.renewed() {
            LostReason::NotRenewed
        } else {
            LostReason::LeaseRanOut
        })
    }
}

/// Why a guard's lock is no longer held ([`Guard::lost_reason`](crate::Guard::lost_reason)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Redis no longer has the lock for this owner: it expired, was deleted
    /// or force-unlocked, or another owner took it.
    Gone,
    /// This client force-unlocked it.
    ForceUnlocked,
    /// No renewal got through before the lease (minus the drift margin) ran
    /// out: Redis was unreachable or too slow, or this process was paused.
    NotRenewed,
    /// A fixed lease (not renewed) ran out.
    LeaseRanOut,
}

impl LostReason {
    /// Its code in a `Hold` (never 0: that is "not lost").
    fn code(self) -> u8 {
        match self {
            LostReason::Gone => 1,
            LostReason::ForceUnlocked => 2,
            LostReason::NotRenewed => 3,
            LostReason::LeaseRanOut => 4,
        }
    }

    /// The reason of `code`; `None` for 0 (not lost).
    fn of_code(code: u8) -> Option<LostReason> {
        match code {
            1 => Some(LostReason::Gone),
            2 => Some(LostReason::ForceUnlocked),
            3 => Some(LostReason::NotRenewed),
            4 => Some(LostReason::LeaseRanOut),
            _ => None,
        }
    }

    /// Its short name: the `reason` label of `redlatch_locks_lost_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            LostReason::Gone => "gone",
            LostReason::ForceUnlocked => "force_unlocked",
            LostReason::NotRenewed => "not_renewed",
            LostReason::LeaseRanOut => "lease_ran_out",
        }
    }
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Gone => "the lock is gone from Redis (expired, deleted, or taken over)",
            LostReason::ForceUnlocked => "this client force-unlocked it",
            LostReason::NotRenewed => "no renewal got through before the lease ran out",
            LostReason::LeaseRanOut => "its fixed lease ran out",
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::hold_kind::TEST_RENEWAL;

    fn hold(lease_ms: u64, renewed: bool) -> Hold {
        Hold::new(NewHold {
            key: Arc::from("suspend"),
            owner: Arc::from("client:owner"),
            kind: HoldKind::Batched(&TEST_RENEWAL),
            lease_ms,
            renewed,
            token: 1,
            named_owner: false,
            sent_at: LeaseInstant::now(),
        })
    }

    #[test]
    fn a_hold_whose_lease_ran_out_while_the_machine_was_suspended_is_not_held() {
        let hold = hold(1_000, true);
        assert!(hold.is_held());
        // The monotonic clock (and every tokio timer) stands still meanwhile.
        crate::lease_clock::simulate_suspend(Duration::from_secs(2));
        assert!(!hold.is_held());
        assert_eq!(hold.lost_reason(), Some(LostReason::NotRenewed));
    }

    #[test]
    fn a_later_confirmation_of_a_shorter_lease_never_shortens_the_hold() {
        let hold = hold(30_000, true);
        // A re-entry sent with a 1 s lease after the settings changed: the
        // script left the 30 s lease in place (it never shortens one).
        hold.confirm(LeaseInstant::now(), 1_000);
        assert_eq!(hold.lease_ms(), 1_000, "the lease sent last");
        crate::lease_clock::simulate_suspend(Duration::from_millis(1_500));
        assert!(hold.is_held(), "the 30 s lease still stands");
    }

    #[test]
    fn confirmations_give_the_same_validity_in_any_order() {
        let early = LeaseInstant::now();
        let late = early + Duration::from_millis(20);
        let confirmations = [(early, 1_000), (late, 30_000), (late, 300)];
        let mut seen = Vec::new();
        for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [1, 2, 0]] {
            let hold = hold(500, false);
            for index in order {
                let (sent_at, lease_ms) = confirmations[index];
                hold.confirm(sent_at, lease_ms);
            }
            seen.push(hold.valid_until());
        }
        assert!(seen.windows(2).all(|pair| pair[0] == pair[1]), "{seen:?}");
    }

    /// Every held lock has one: a client may hold 100,000 (measure 9). It
    /// was 144 bytes with its loss signal inline (a `Notify` of 32 that
    /// few holds ever use) and word-sized counters; 120 since, and 144
    /// again with the owner kept as a number (24 bytes here, and no owner
    /// string of about 64 bytes on the heap: `engine/owner_field.rs`); 136
    /// with the loss reason in one byte; 136 still with a short key inline
    /// (8 bytes more here, 32 fewer on the heap: `engine/key_text.rs`) and
    /// the kind in one word (8 fewer: `KindOfHold`); 128 with the owner's
    /// numbers kept without the client's prefix (`engine/owner_field.rs`).
    #[test]
    fn a_hold_takes_little_room() {
        let size = std::mem::size_of::<Hold>();
        assert!(size <= HOLD_BOUND, "{size}");
    }

    const HOLD_BOUND: usize = 128;

    /// A waiter for the loss made before the mark, or after it, sees it.
    #[tokio::test]
    async fn a_loss_is_seen_by_waiters_made_before_and_after_it() {
        let held = Arc::new(hold(30_000, true));
        let before = tokio::spawn(held.clone().until_marked_lost());
        tokio::task::yield_now().await;
        held.mark_lost(LostReason::Gone);
        tokio::time::timeout(Duration::from_secs(5), before)
            .await
            .expect("a waiter made before the mark is woken")
            .expect("the waiter's task");
        tokio::time::timeout(Duration::from_secs(5), held.clone().until_marked_lost())
            .await
            .expect("a waiter made after the mark returns at once");
    }

    #[test]
    fn the_first_reason_a_hold_is_lost_for_sticks() {
        let hold = hold(30_000, true);
        assert_eq!(hold.lost_reason(), None);
        assert!(!hold.is_marked_lost());
        hold.mark_lost(LostReason::ForceUnlocked);
        hold.mark_lost(LostReason::Gone);
        assert!(hold.is_marked_lost());
        assert_eq!(hold.lost_reason(), Some(LostReason::ForceUnlocked));
        for reason in [
            LostReason::Gone,
            LostReason::ForceUnlocked,
            LostReason::NotRenewed,
            LostReason::LeaseRanOut,
        ] {
            assert_eq!(LostReason::of_code(reason.code()), Some(reason));
        }
    }

    #[test]
    fn a_hold_is_renewed_while_any_guard_asked_for_it() {
        let hold = hold(1_000, false);
        assert!(!hold.renewed());
        hold.count_guard(true, true);
        hold.count_guard(false, true);
        assert!(hold.renewed());
        hold.count_guard(false, false);
        assert!(hold.renewed(), "a fixed-lease guard left");
        hold.count_guard(true, false);
        assert!(!hold.renewed(), "the renewed guard left");
    }
}

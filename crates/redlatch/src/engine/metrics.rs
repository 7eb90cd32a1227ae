//! What the engine records through the [`metrics`](https://docs.rs/metrics)
//! facade (the `metrics` feature): the series names, their descriptions,
//! and one recording function per event. The public list is
//! `redlatch::metrics`; without the feature `engine/metrics_off.rs` stands
//! in with the same functions doing nothing.

use std::time::Duration;

/// Time spent in an acquire call (seconds).
pub const ACQUIRE_SECONDS: &str = "redlatch_acquire_seconds";
/// Successful acquisitions.
pub const ACQUISITIONS: &str = "redlatch_acquisitions_total";
/// Acquires that had to wait.
pub const CONTENDED_WAITS: &str = "redlatch_contended_waits_total";
/// Parked waiters woken.
pub const WAKEUPS: &str = "redlatch_wakeups_total";
/// Locks renewed by the watchdog.
pub const RENEWALS: &str = "redlatch_renewals_total";
/// Lock renewals that failed.
pub const RENEWAL_FAILURES: &str = "redlatch_renewal_failures_total";
/// Holds marked lost.
pub const LOCKS_LOST: &str = "redlatch_locks_lost_total";
/// Releases of locks no longer held.
pub const RELEASES_NOT_HELD: &str = "redlatch_releases_not_held_total";
/// Holds tracked now.
pub const HELD_LOCKS: &str = "redlatch_held_locks";
/// Acquires refused because their wait would close a wait-for cycle.
pub const DEADLOCKS: &str = "redlatch_deadlocks_total";

/// Every series name above, for tools that check dashboards and docs
/// against what the library records.
pub const ALL: [&str; 10] = [
    ACQUIRE_SECONDS,
    ACQUISITIONS,
    CONTENDED_WAITS,
    WAKEUPS,
    RENEWALS,
    RENEWAL_FAILURES,
    LOCKS_LOST,
    RELEASES_NOT_HELD,
    HELD_LOCKS,
    DEADLOCKS,
];

/// Registers units and descriptions of every redlatch series with the
/// installed recorder. Optional; call it once after installing the recorder.
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        ACQUIRE_SECONDS,
        Unit::Seconds,
        "Time spent in an acquire call"
    );
    describe_counter!(ACQUISITIONS, "Successful lock acquisitions");
    describe_counter!(
        CONTENDED_WAITS,
        "Acquires that found the lock held and waited"
    );
    describe_counter!(WAKEUPS, "Parked waiters woken");
    describe_counter!(RENEWALS, "Locks renewed by the watchdog");
    describe_counter!(RENEWAL_FAILURES, "Lock renewals that failed");
    describe_counter!(LOCKS_LOST, "Holds marked lost");
    describe_counter!(
        RELEASES_NOT_HELD,
        "Releases of a lock the owner no longer held"
    );
    describe_gauge!(HELD_LOCKS, "Holds this process tracks now");
    describe_counter!(
        DEADLOCKS,
        "Acquires refused because their wait would close a wait-for cycle"
    );
}

pub(crate) fn acquire_finished(outcome: &'static str, took: Duration) {
    ::metrics::histogram!(ACQUIRE_SECONDS, "outcome" => outcome).record(took.as_secs_f64());
}

pub(crate) fn acquired(reentered: bool) {
    let kind = if reentered { "reentered" } else { "fresh" };
    ::metrics::counter!(ACQUISITIONS, "kind" => kind).increment(1);
}

pub(crate) fn contended_wait() {
    ::metrics::counter!(CONTENDED_WAITS).increment(1);
}

pub(crate) fn woken(reason: &'static str) {
    ::metrics::counter!(WAKEUPS, "reason" => reason).increment(1);
}

pub(crate) fn renewed(locks: u64) {
    ::metrics::counter!(RENEWALS).increment(locks);
}

pub(crate) fn renewal_failed(locks: u64) {
    ::metrics::counter!(RENEWAL_FAILURES).increment(locks);
}

/// `reason`: [`LostReason::label`](crate::engine::hold::LostReason::label).
pub(crate) fn lock_lost(reason: &'static str) {
    ::metrics::counter!(LOCKS_LOST, "reason" => reason).increment(1);
}

pub(crate) fn release_not_held() {
    ::metrics::counter!(RELEASES_NOT_HELD).increment(1);
}

pub(crate) fn held_locks(count: usize) {
    ::metrics::gauge!(HELD_LOCKS).set(count as f64);
}

pub(crate) fn deadlock() {
    ::metrics::counter!(DEADLOCKS).increment(1);
}

//! Metrics, recorded through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! Nothing is recorded until the application installs a recorder (for
//! example `metrics-exporter-prometheus`); then these series appear. None is
//! labelled by lock name: names are unbounded and would explode a time-series
//! database. Call [`describe`] after installing the recorder to register
//! units and help texts.
//!
//! | name | kind | labels | meaning |
//! |---|---|---|---|
//! | `redlatch_acquire_seconds` | histogram | `outcome` = `acquired` / `not_acquired` / `error` | time spent in an acquire call |
//! | `redlatch_acquisitions_total` | counter | `kind` = `fresh` / `reentered` | successful acquisitions |
//! | `redlatch_contended_waits_total` | counter | | acquires that found the lock held and waited |
//! | `redlatch_wakeups_total` | counter | `reason` = `message` / `lease_end` / `resubscribed` | parked waiters woken |
//! | `redlatch_renewals_total` | counter | | locks renewed by the watchdog |
//! | `redlatch_renewal_failures_total` | counter | | lock renewals that failed (Redis unreachable or slow) |
//! | `redlatch_locks_lost_total` | counter | `reason` = `gone` / `force_unlocked` / `not_renewed` / `lease_ran_out` | holds marked lost (gone from Redis, or lease ran out) |
//! | `redlatch_releases_not_held_total` | counter | | releases of a lock the owner no longer held |
//! | `redlatch_held_locks` | gauge | | holds this process tracks now |
//! | `redlatch_deadlocks_total` | counter | | acquires refused because their wait would close a wait-for cycle ([`Error::Deadlock`](crate::Error::Deadlock)) |

pub use crate::engine::metrics::{
    ACQUIRE_SECONDS, ACQUISITIONS, ALL, CONTENDED_WAITS, DEADLOCKS, HELD_LOCKS, LOCKS_LOST,
    RELEASES_NOT_HELD, RENEWAL_FAILURES, RENEWALS, WAKEUPS, describe,
};

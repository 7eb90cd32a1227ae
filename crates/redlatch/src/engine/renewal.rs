//! What every renewal path shares: when a hold is renewed, when a failed
//! renewal is tried again, and the tracing target of their events. The
//! watchdog, its schedule, the renewals through the loss watch's connection
//! and the primitives that pace their own retries by a lease all read it
//! here.

use std::time::Duration;

/// The tracing target of the renewals' events (renewed, retried, hold
/// lost): a stable name to filter on, e.g. `RUST_LOG=redlatch::renewal=debug`.
pub(crate) const LOG_TARGET: &str = "redlatch::renewal";

/// How long after a confirmed acquire or renewal a hold is renewed: a third
/// of its lease, so two renewals can fail before the lease runs out.
pub(crate) fn renewal_period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).max(1))
}

/// How soon a renewal that did not get through is tried again.
pub(crate) fn retry_delay(lease_ms: u64) -> Duration {
    (renewal_period(lease_ms) / 3).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_at_a_third_of_the_lease() {
        assert_eq!(renewal_period(30_000), Duration::from_secs(10));
        assert_eq!(renewal_period(1), Duration::from_millis(1));
        assert_eq!(retry_delay(30_000), Duration::from_secs(1));
        assert_eq!(retry_delay(30), Duration::from_millis(10));
    }
}

//! Limits on what callers pass: lease durations (validation, and the
//! safety margin for clock drift), lock and owner name lengths.

use std::time::Duration;

use crate::error::{Error, Result};

/// Longest lock name accepted, in bytes, key prefix included.
///
/// Redis would take far longer keys, but a name this long is almost always a
/// bug (a request body used as a name), and every script call carries it.
pub(crate) const MAX_NAME_LEN: usize = 1024;

/// Longest owner name accepted by [`Lock::with_owner`](crate::Lock::with_owner), in bytes.
pub(crate) const MAX_OWNER_LEN: usize = 256;

/// Shortest lease accepted: Redis expiries have millisecond resolution.
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(1);

/// Shortest lease the watchdog will renew: it renews at a third of the
/// lease, and below this the renewals would be more traffic than work.
pub(crate) const MIN_WATCHDOG_LEASE: Duration = Duration::from_millis(30);

/// Longest lease accepted (30 days). Longer is a unit mistake, not a lease:
/// a crashed holder would block everyone for that long.
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Checks a lease and converts it to the whole milliseconds sent to Redis.
pub(crate) fn lease_millis(what: &'static str, lease: Duration) -> Result<u64> {
    if lease < MIN_LEASE {
        return Err(Error::InvalidDuration {
            what,
            value: lease,
            reason: "must be at least 1 ms",
        });
    }
    if lease > MAX_LEASE {
        return Err(Error::InvalidDuration {
            what,
            value: lease,
            reason: "must be at most 30 days",
        });
    }
    Ok(lease.as_millis() as u64)
}

/// Checks a lease that the watchdog will renew.
pub(crate) fn watchdog_lease_millis(what: &'static str, lease: Duration) -> Result<u64> {
    if lease < MIN_WATCHDOG_LEASE {
        return Err(Error::InvalidDuration {
            what,
            value: lease,
            reason: "a renewed lease must be at least 30 ms",
        });
    }
    lease_millis(what, lease)
}

/// How long a lease can be trusted after the request that set it was sent.
///
/// Clocks of client and server drift apart a little; Redis's own
/// distributed-lock page suggests a margin of 1% of the lease plus 2 ms.
pub(crate) fn validity(lease_ms: u64) -> Duration {
    let drift_ms = lease_ms / 100 + 2;
    Duration::from_millis(lease_ms.saturating_sub(drift_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_out_of_bounds_are_refused() {
        assert!(lease_millis("lease", Duration::ZERO).is_err());
        assert!(lease_millis("lease", Duration::from_micros(999)).is_err());
        assert_eq!(lease_millis("lease", Duration::from_millis(1)).unwrap(), 1);
        assert!(lease_millis("lease", MAX_LEASE + Duration::from_secs(1)).is_err());
        assert!(lease_millis("lease", Duration::MAX).is_err());
        assert!(watchdog_lease_millis("lease", Duration::from_millis(29)).is_err());
        assert_eq!(
            watchdog_lease_millis("lease", Duration::from_secs(30)).unwrap(),
            30_000
        );
    }

    #[test]
    fn validity_leaves_a_drift_margin() {
        assert_eq!(validity(30_000), Duration::from_millis(30_000 - 302));
        assert_eq!(validity(1), Duration::ZERO);
    }
}

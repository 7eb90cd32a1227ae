//! One clock for every process of a run: CLOCK_MONOTONIC in nanoseconds.
//!
//! `std::time::Instant` reads the same clock on Linux but cannot cross a
//! process boundary; a plain `u64` can, so worker processes report their
//! timestamps in it and the parent compares them with its own.

use std::time::Duration;

/// Nanoseconds on the system-wide monotonic clock.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until the monotonic clock reads `at_ns` (returns at once if past).
pub async fn sleep_until_ns(at_ns: u64) {
    let now = now_ns();
    if at_ns > now {
        tokio::time::sleep(Duration::from_nanos(at_ns - now)).await;
    }
}

/// Nanoseconds in a duration, saturating.
pub fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

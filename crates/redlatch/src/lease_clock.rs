//! The lease clock: [`LeaseInstant`], on which every lease deadline is kept.

use std::ops::{Add, Sub};
use std::time::Duration;

/// An instant on the lease clock: CLOCK_BOOTTIME on Linux, which, unlike
/// `std::time::Instant` (CLOCK_MONOTONIC), keeps counting while the machine
/// or VM is suspended. A holder resumed after its lease ran out in Redis then
/// sees at once that its lease is over, instead of trusting it for the time
/// it slept. Elsewhere it falls back to the monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct LeaseInstant {
    nanos: u64,
}

impl LeaseInstant {
    /// Now, on the lease clock.
    pub(crate) fn now() -> LeaseInstant {
        LeaseInstant {
            nanos: clock::now_nanos().saturating_add(clock::suspended_nanos()),
        }
    }

    /// Time from `earlier` to `self`; zero when `earlier` is later.
    pub(crate) fn saturating_duration_since(self, earlier: LeaseInstant) -> Duration {
        Duration::from_nanos(self.nanos.saturating_sub(earlier.nanos))
    }

    /// Time elapsed since `self`.
    pub(crate) fn elapsed(self) -> Duration {
        LeaseInstant::now().saturating_duration_since(self)
    }

    /// The same moment as a `std::time::Instant`, seen from now (for public
    /// APIs that speak of `Instant`).
    pub(crate) fn to_std(self) -> std::time::Instant {
        let (now, std_now) = (LeaseInstant::now(), std::time::Instant::now());
        if self >= now {
            std_now + self.saturating_duration_since(now)
        } else {
            let ago = now.saturating_duration_since(self);
            std_now.checked_sub(ago).unwrap_or(std_now)
        }
    }

    /// `self + duration`, or `None` past the clock's range (~584 years).
    pub(crate) fn checked_add(self, duration: Duration) -> Option<LeaseInstant> {
        let add = u64::try_from(duration.as_nanos()).ok()?;
        Some(LeaseInstant {
            nanos: self.nanos.checked_add(add)?,
        })
    }
}

impl Add<Duration> for LeaseInstant {
    type Output = LeaseInstant;

    /// Saturates at the end of the clock's range rather than panicking.
    fn add(self, duration: Duration) -> LeaseInstant {
        let add = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        LeaseInstant {
            nanos: self.nanos.saturating_add(add),
        }
    }
}

impl Sub<Duration> for LeaseInstant {
    type Output = LeaseInstant;

    /// Saturates at the clock's origin rather than panicking.
    fn sub(self, duration: Duration) -> LeaseInstant {
        let sub = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        LeaseInstant {
            nanos: self.nanos.saturating_sub(sub),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod clock {
    pub(super) fn now_nanos() -> u64 {
        match boot_time() {
            Some(now) => (now.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(now.tv_nsec as u64),
            // Only fails on kernels older than 2.6.39: count from process start instead.
            None => super::fallback::now_nanos(),
        }
    }

    /// CLOCK_BOOTTIME now, straight from libc (which tokio already links):
    /// one call does not justify a crate of its own.
    pub(super) fn boot_time() -> Option<libc::timespec> {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec that outlives the call,
        // which writes nothing else.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
        (status == 0).then_some(now)
    }

    pub(super) use super::suspend::suspended_nanos;
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod clock {
    pub(super) use super::fallback::now_nanos;
    pub(super) use super::suspend::suspended_nanos;
}

/// The monotonic clock, counted from the first reading in this process.
#[allow(dead_code)] // unused on Linux unless CLOCK_BOOTTIME is missing
mod fallback {
    use std::sync::LazyLock;
    use std::time::Instant;

    static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

    pub(super) fn now_nanos() -> u64 {
        // Start at 1 s so that subtracting short durations never hits zero.
        1_000_000_000 + ORIGIN.elapsed().as_nanos() as u64
    }
}

/// A suspension simulated by unit tests (per thread, so tests running side
/// by side do not see each other's); always zero outside tests.
mod suspend {
    #[cfg(test)]
    thread_local! {
        static SUSPENDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    #[cfg(test)]
    pub(super) fn suspended_nanos() -> u64 {
        SUSPENDED.with(std::cell::Cell::get)
    }

    #[cfg(not(test))]
    pub(super) fn suspended_nanos() -> u64 {
        0
    }

    /// Moves this thread's lease clock forward as a suspension of the
    /// machine would, leaving the monotonic clock (and tokio's timers) alone.
    #[cfg(test)]
    pub(crate) fn simulate(duration: std::time::Duration) {
        SUSPENDED.with(|cell| cell.set(cell.get() + duration.as_nanos() as u64));
    }
}

#[cfg(test)]
pub(crate) use suspend::simulate as simulate_suspend;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_clock_advances_with_real_time() {
        let start = LeaseInstant::now();
        let monotonic = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let lease_elapsed = start.elapsed();
        let monotonic_elapsed = monotonic.elapsed();
        assert!(
            lease_elapsed >= Duration::from_millis(20),
            "{lease_elapsed:?}"
        );
        // Both clocks tick at the same rate while the machine runs.
        let apart = lease_elapsed.abs_diff(monotonic_elapsed);
        assert!(apart < Duration::from_millis(50), "{apart:?}");
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_lease_clock_is_the_boot_clock_that_counts_suspended_time() {
        let boot = clock::boot_time().unwrap();
        let boot_nanos = boot.tv_sec as u64 * 1_000_000_000 + boot.tv_nsec as u64;
        let lease = LeaseInstant::now().nanos;
        assert!(lease >= boot_nanos && lease - boot_nanos < 50_000_000);
    }

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let now = LeaseInstant::now();
        assert_eq!(now + Duration::MAX, LeaseInstant { nanos: u64::MAX });
        assert_eq!(now - Duration::MAX, LeaseInstant { nanos: 0 });
        assert_eq!(now.checked_add(Duration::MAX), None);
        assert_eq!(
            (now + Duration::from_secs(1)).saturating_duration_since(now),
            Duration::from_secs(1)
        );
        assert_eq!(
            now.saturating_duration_since(now + Duration::from_secs(1)),
            Duration::ZERO
        );
    }
}

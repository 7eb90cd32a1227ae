//! One clock for every process of a run.
//!
//! `std::time::Instant` cannot be sent to another process, but the kernel's
//! `CLOCK_MONOTONIC` it reads is system-wide: nanoseconds read from it in two
//! processes on one machine order their events.

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds on the system-wide monotonic clock.
pub fn now_ns() -> u64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 would only make a run look short.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |ts| {
        let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
        let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
        secs * 1_000_000_000 + nanos
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = super::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::now_ns() >= a + 2_000_000);
    }
}

//! Whether the reserve consumer is consuming, for `/health/ready`.
//!
//! Accepted orders reach the database only through the consumer, so an
//! instance whose consumer keeps failing is not ready even when Redis and
//! the database answer a PING (the order stream lost its group, the stream
//! key holds something else, the database refuses every write).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long the consumer's steps must keep failing before readiness says
/// so: one failed step (a blip, a backoff) is not an outage.
pub const FAILING_FOR: Duration = Duration::from_secs(2);

/// The consumer's state, shared with the HTTP side.
#[derive(Debug, Default)]
pub struct ConsumerHealth {
    /// Since when every step has failed, and the last error.
    failing: Mutex<Option<(Instant, String)>>,
}

impl ConsumerHealth {
    /// A step went through: the consumer is consuming.
    pub fn step_succeeded(&self) {
        *self.failing.lock() = None;
    }

    /// A step failed with `error`.
    pub fn step_failed(&self, error: &str) {
        let mut failing = self.failing.lock();
        let since = failing
            .as_ref()
            .map_or_else(Instant::now, |(since, _)| *since);
        *failing = Some((since, error.to_owned()));
    }

    /// The last error, when every step has failed for [`FAILING_FOR`] or more.
    pub fn stuck(&self) -> Option<String> {
        let failing = self.failing.lock();
        let (since, error) = failing.as_ref()?;
        (since.elapsed() >= FAILING_FOR).then(|| error.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_clears_the_failure_and_a_short_one_is_not_stuck() {
        let health = ConsumerHealth::default();
        assert_eq!(health.stuck(), None);
        health.step_failed("NOGROUP");
        assert_eq!(health.stuck(), None, "failing for less than FAILING_FOR");
        *health.failing.lock() = Some((Instant::now() - FAILING_FOR, "NOGROUP".to_owned()));
        health.step_failed("NOGROUP again");
        assert_eq!(health.stuck().as_deref(), Some("NOGROUP again"));
        health.step_succeeded();
        assert_eq!(health.stuck(), None);
    }
}

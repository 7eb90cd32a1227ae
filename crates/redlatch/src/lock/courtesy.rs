//! Hand-off courtesy: after a release that woke waiters in other processes,
//! this client's next acquire of the same lock steps aside briefly.
//!
//! Without it the releasing process almost always takes the lock straight
//! back: its next attempt needs no wake-up, while the waiter it woke must
//! first receive the pub/sub message and then send its own attempt. Waiters
//! of the same client are already served in order by the wake-up queue; this
//! covers waiters elsewhere.

use std::collections::HashMap;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::sync::unpoisoned::Mutex;

/// Above this many remembered releases, expired ones are swept out.
const SWEEP_AT: usize = 1024;

/// Recent final releases that reached waiters in other processes.
#[derive(Default)]
pub(crate) struct Courtesy {
    until: Mutex<HashMap<String, LeaseInstant>>,
}

impl Courtesy {
    /// Records that `key` was just released to waiters elsewhere; they get
    /// `grace` to take it (zero: no courtesy).
    pub(crate) fn note_release(&self, key: &str, grace: Duration) {
        if grace.is_zero() {
            return;
        }
        let now = LeaseInstant::now();
        let mut until = self.until.lock();
        if until.len() >= SWEEP_AT {
            until.retain(|_, at| *at > now);
        }
        until.insert(key.to_owned(), now + grace);
    }

    /// Until when an acquire of `key` should step aside, if it should.
    pub(crate) fn step_aside_until(&self, key: &str) -> Option<LeaseInstant> {
        let mut until = self.until.lock();
        let at = *until.get(key)?;
        if at <= LeaseInstant::now() {
            until.remove(key);
            return None;
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::HANDOFF_GRACE;

    #[test]
    fn a_release_is_remembered_for_the_grace_period_only() {
        let courtesy = Courtesy::default();
        assert_eq!(courtesy.step_aside_until("a"), None);
        courtesy.note_release("a", HANDOFF_GRACE);
        courtesy.note_release("b", Duration::ZERO);
        assert_eq!(
            courtesy.step_aside_until("b"),
            None,
            "zero grace: no courtesy"
        );
        let until = courtesy.step_aside_until("a").expect("just released");
        assert!(until <= LeaseInstant::now() + HANDOFF_GRACE);
        std::thread::sleep(HANDOFF_GRACE);
        assert_eq!(courtesy.step_aside_until("a"), None);
    }
}

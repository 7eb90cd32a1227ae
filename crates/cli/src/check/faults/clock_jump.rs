//! `clock-jump`: the lock server's wall clock moved 10 leases forward, as
//! an NTP step would (libfaketime; the monotonic clock is left alone).

use super::kind::{FaultKind, Needs};
use crate::check::workload::lab::Lab;

/// The wall clock jumps ten leases ahead.
pub struct ClockJump;

impl FaultKind for ClockJump {
    fn needs(&self) -> Needs {
        Needs {
            clock: true,
            ..Needs::default()
        }
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        let by = lab.lease * 10;
        lab.lock.jump_clock(by)
    }
}

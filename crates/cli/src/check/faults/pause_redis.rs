//! `pause-redis`: the lock server stopped with SIGSTOP for 2 leases.

use std::time::Duration;

use super::kind::FaultKind;
use crate::check::workload::lab::{Lab, Later};

/// SIGSTOP on the lock server, SIGCONT 2 leases later.
pub struct PauseRedis;

impl FaultKind for PauseRedis {
    fn outage(&self, lease: Duration) -> Duration {
        lease * 2
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock.pause()?;
        lab.later(
            Later::after(self.outage(lab.lease), |lab| {
                lab.lock.resume()?;
                lab.note("redis resumed");
                Ok(())
            })
            .blocking()
            .also_at_end(),
        );
        Ok(())
    }
}

//! `restart-redis-late`: the lock server killed, and restarted empty only
//! 2 leases later (Redis's "delayed restart" rule).

use std::time::Duration;

use super::kind::FaultKind;
use crate::check::workload::lab::{Lab, Later};

/// SIGKILL, then a new empty server 2 leases later.
pub struct RestartRedisLate;

impl FaultKind for RestartRedisLate {
    fn outage(&self, lease: Duration) -> Duration {
        lease * 2
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock.kill(0)?;
        lab.later(
            Later::after(self.outage(lab.lease), |lab| {
                lab.lock.restart(0)?;
                lab.note("redis restarted empty");
                Ok(())
            })
            .blocking()
            .also_at_end(),
        );
        Ok(())
    }
}

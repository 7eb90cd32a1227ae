//! `restart-redis`: the lock server killed and restarted empty at once.

use super::kind::FaultKind;
use crate::check::workload::lab::Lab;

/// SIGKILL, then a new empty server on the same port.
pub struct RestartRedis;

impl FaultKind for RestartRedis {
    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock.restart(0)
    }
}

//! `restart-master-late`: as `restart-master`, but the shared master stays
//! down 1.5 leases before it comes back empty (Redis's "delayed restart").

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use super::restart_master::{NEEDS, applies, prepare, restart_shared};
use crate::check::points::Point;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// The shared master killed right after a holder took the lock, restarted
/// empty 1.5 leases later.
pub struct RestartMasterLate;

impl FaultKind for RestartMasterLate {
    fn needs(&self) -> Needs {
        NEEDS
    }

    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        applies(recipe)
    }

    fn point(&self, _pause_point: Point) -> Option<Point> {
        Some(Point::Holding)
    }

    fn outage(&self, lease: Duration) -> Duration {
        lease * 3 / 2
    }

    fn prepare(&self, lab: &mut Lab) {
        prepare(lab);
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.arm_next();
        Ok(())
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        restart_shared(lab, index, self.outage(lab.lease))
    }
}

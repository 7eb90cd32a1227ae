//! `kill-client`: a holder killed with SIGKILL while it holds the lock.

use super::kind::FaultKind;
use crate::check::points::Point;
use crate::check::workload::lab::Lab;

/// SIGKILL right after taking the lock; a new worker takes its place.
pub struct KillClient;

impl FaultKind for KillClient {
    fn point(&self, _pause_point: Point) -> Option<Point> {
        Some(Point::Holding)
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        lab.kill_and_replace(index);
        Ok(())
    }
}

//! `partition-one-way`: as `partition`, but only the lock servers' replies
//! are dropped: the holder's requests (a renewal, a release) still arrive.

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use super::partition::cut;
use crate::check::points::Point;
use crate::check::workload::lab::Lab;
use crate::check::workload::links::Links;

/// Replies dropped right after taking the lock; healed 2.5 leases later.
pub struct PartitionOneWay;

impl FaultKind for PartitionOneWay {
    fn needs(&self) -> Needs {
        Needs {
            proxies: true,
            ..Needs::default()
        }
    }

    fn point(&self, _pause_point: Point) -> Option<Point> {
        Some(Point::Holding)
    }

    fn outage(&self, lease: Duration) -> Duration {
        lease * 5 / 2
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.arm_next();
        Ok(())
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        let id = lab.workers[index].id;
        let what = format!("drops the lock servers' replies to w{id} (its requests still arrive)");
        cut(lab, index, self.outage(lab.lease), Links::cut_replies, what);
        Ok(())
    }
}

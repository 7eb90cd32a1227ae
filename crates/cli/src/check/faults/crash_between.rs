//! `crash-between`: a worker killed between the two commands of a
//! two-command step (SETNX then EXPIRE, say).

use super::kind::FaultKind;
use crate::check::points::Point;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// SIGKILL between the two commands; a new worker takes its place.
pub struct CrashBetween;

impl FaultKind for CrashBetween {
    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        if recipe.has_between {
            Ok(())
        } else {
            Err("no step of two commands")
        }
    }

    fn point(&self, _pause_point: Point) -> Option<Point> {
        Some(Point::Between)
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        lab.kill_and_replace(index);
        Ok(())
    }
}

//! `partition`: a holder cut off from every lock server, both ways, for
//! 2.5 leases while it goes on working; then the links heal.

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use crate::check::points::Point;
use crate::check::workload::lab::{Lab, Later};
use crate::check::workload::links::Links;

/// Cut right after taking the lock; healed 2.5 leases later.
pub struct Partition;

impl FaultKind for Partition {
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
        cut(
            lab,
            index,
            self.outage(lab.lease),
            Links::cut_off,
            format!("cuts w{id} off from the lock servers"),
        );
        Ok(())
    }
}

/// Cuts worker `index`'s links with `how`, lets it go on working, and heals
/// them after `outage`. Shared with `partition-one-way`.
pub fn cut(lab: &mut Lab, index: usize, outage: Duration, how: fn(&Links, u32), what: String) {
    let id = lab.workers[index].id;
    how(&lab.links, id);
    lab.injected_note(what);
    lab.workers[index].held_by_lab = true;
    lab.later(
        Later::after(outage, move |lab| {
            lab.links.heal(id);
            if let Some(index) = lab.index_of(id) {
                lab.workers[index].held_by_lab = false;
            }
            lab.note(format!("heals w{id}'s links"));
            Ok(())
        })
        .blocking(),
    );
    lab.go_on(index);
}

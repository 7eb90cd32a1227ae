//! `partition` and `partition-one-way`: a holder cut off from every lock
//! server for 2.5 leases while it goes on working; then the links heal.
//! Both ways, or one way: only the lock servers' replies are dropped, and
//! the holder's requests (a renewal, a release) still arrive.

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use crate::check::points::Point;
use crate::check::workload::lab::{Lab, Later};
use crate::check::workload::links::Links;

/// Cut right after taking the lock; healed 2.5 leases later.
pub struct Partition {
    /// How worker `id`'s links are cut.
    cut: fn(&Links, u32),
    /// What the lab notes for worker `id`.
    what: fn(u32) -> String,
}

/// `partition`: both ways.
pub const BOTH_WAYS: Partition = Partition {
    cut: Links::cut_off,
    what: |id| format!("cuts w{id} off from the lock servers"),
};

/// `partition-one-way`: the lock servers' replies only.
pub const ONE_WAY: Partition = Partition {
    cut: Links::cut_replies,
    what: |id| format!("drops the lock servers' replies to w{id} (its requests still arrive)"),
};

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

    /// Cuts the worker's links, lets it go on working, and heals them
    /// after the outage.
    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        let id = lab.workers[index].id;
        (self.cut)(&lab.links, id);
        lab.injected_note((self.what)(id));
        lab.workers[index].held_by_lab = true;
        lab.later(
            Later::after(self.outage(lab.lease), move |lab| {
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
        Ok(())
    }
}

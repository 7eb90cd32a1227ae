//! `pause-client`: a holder stopped at its worst moment for 2.5 leases.

use std::time::Duration;

use super::kind::FaultKind;
use crate::check::event::{Event, What};
use crate::check::points::Point;
use crate::check::workload::lab::{Lab, Later};

/// SIGSTOP at the recipe's pause point, SIGCONT 2.5 leases later.
pub struct PauseClient;

impl FaultKind for PauseClient {
    fn point(&self, pause_point: Point) -> Option<Point> {
        Some(pause_point)
    }

    fn outage(&self, lease: Duration) -> Duration {
        lease * 5 / 2
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        let id = lab.workers[index].id;
        lab.injected(What::Paused { worker: id });
        lab.workers[index].held_by_lab = true;
        // Not blocking: the next holder may be paused while this one sleeps.
        lab.later(
            Later::after(self.outage(lab.lease), move |lab| {
                if let Some(index) = lab.index_of(id) {
                    lab.go_on(index);
                    lab.workers[index].held_by_lab = false;
                    lab.push_event(Event::now(None, What::Resumed { worker: id }));
                }
                Ok(())
            })
            .also_at_end(),
        );
        Ok(())
    }
}

//! What a fault is to the lab: what it needs set up, what it applies to,
//! when and how it is injected, and how it is undone. Each fault implements
//! [`FaultKind`] in a file of its own; the cell (`workload/cell.rs`) runs
//! any of them the same way.

use std::time::Duration;

use crate::check::points::Point;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// What the cell sets up before the workers start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    /// The faulted lock server runs under libfaketime. A machine without it
    /// cannot run the cell: that is "unavailable", not an error.
    pub clock: bool,
    /// The lock servers are a Sentinel group (a master and replicas).
    pub sentinel: bool,
    /// Workers reach the lock servers through the lab's proxies.
    pub proxies: bool,
}

/// One fault. Every method has a default: a fault the lab does by itself
/// overrides [`inject`](Self::inject); one done to a worker names its
/// [`point`](Self::point) and what [`on_stopped`](Self::on_stopped) does.
pub trait FaultKind: Sync {
    /// What the cell sets up for it.
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// Whether it means anything for a recipe; if not, why (the table's note).
    fn applies(&self, _recipe: &Info) -> Result<(), &'static str> {
        Ok(())
    }

    /// For a fault done to a worker: where an armed worker stops itself
    /// (`pause_point` is the recipe's own worst moment for a pause). The
    /// lab then acts in [`on_stopped`](Self::on_stopped).
    fn point(&self, _pause_point: Point) -> Option<Point> {
        None
    }

    /// How long nobody can be expected to acquire because of one injection.
    fn outage(&self, _lease: Duration) -> Duration {
        Duration::ZERO
    }

    /// Whether it is injected once and stays for the rest of the run.
    fn once(&self) -> bool {
        false
    }

    /// The shortest lease the fault is run with.
    fn lease_floor(&self) -> Duration {
        Duration::ZERO
    }

    /// The shortest run the fault needs.
    fn duration_floor(&self) -> Duration {
        Duration::ZERO
    }

    /// Done once the servers and links exist, before any worker starts.
    fn prepare(&self, _lab: &mut Lab) {}

    /// Done at each injection time: the fault itself. By default, for a
    /// fault done to a worker, it arms the next worker to stop at
    /// [`point`](Self::point).
    ///
    /// # Errors
    /// When a server cannot be reached or acted on; the run is lost.
    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.arm_next();
        Ok(())
    }

    /// Done to worker `index` once it stopped itself at its point. By
    /// default it is let go on.
    ///
    /// # Errors
    /// As for [`inject`](Self::inject).
    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        lab.go_on(index);
        Ok(())
    }

    /// Done at every tick of the lab, for faults that watch the servers.
    ///
    /// # Errors
    /// As for [`inject`](Self::inject).
    fn watch(&self, _lab: &mut Lab) -> Result<(), String> {
        Ok(())
    }
}

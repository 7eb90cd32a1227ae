//! `failover`: a Sentinel group whose master is killed right after it
//! granted a lock it has not replicated; Sentinel promotes a replica that
//! never saw the grant. The group itself is in `workload/failover.rs`.

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use crate::check::points::Point;
use crate::check::recipes::info::Info;
use crate::check::workload::failover::SentinelLock;
use crate::check::workload::lab::Lab;

/// Break replication, let a worker take the lock, kill the master.
pub struct Failover;

impl FaultKind for Failover {
    fn needs(&self) -> Needs {
        Needs {
            sentinel: true,
            ..Needs::default()
        }
    }

    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        if recipe.sentinel {
            Ok(())
        } else {
            Err("needs the library's Sentinel support")
        }
    }

    fn point(&self, _pause_point: Point) -> Option<Point> {
        Some(Point::Holding)
    }

    /// Sentinel's detection and election.
    fn outage(&self, _lease: Duration) -> Duration {
        Duration::from_secs(3)
    }

    /// A failover uses up the group's one replica.
    fn once(&self) -> bool {
        true
    }

    /// The old holder must still believe it holds when the promoted replica
    /// grants the lock again (production leases are 10-30 s; a failover
    /// takes seconds).
    fn lease_floor(&self) -> Duration {
        Duration::from_secs(10)
    }

    /// The failover and a lease after it.
    fn duration_floor(&self) -> Duration {
        Duration::from_secs(6)
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        let Some(index) = lab.next_live() else {
            return Ok(());
        };
        // What the master grants from now on is not replicated.
        group(lab)?.break_replication()?;
        lab.note("breaks the master's replication link");
        lab.arm(index);
        Ok(())
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        let id = lab.workers[index].id;
        let sentinel = group(lab)?;
        if !sentinel.master_killed() {
            let port = sentinel.kill_master()?;
            lab.injected_note(format!(
                "kill -9 the master (port {port}): w{id}'s grant is not replicated"
            ));
        }
        lab.go_on(index);
        Ok(())
    }

    fn watch(&self, lab: &mut Lab) -> Result<(), String> {
        let sentinel = group(lab)?;
        if sentinel.broken_for(Duration::from_secs(1)) {
            let port = sentinel.kill_master()?;
            lab.injected_note(format!(
                "kill -9 the master (port {port}): nobody got the lock in the 1 s since replication broke"
            ));
        }
        if let Some((port, has_lock)) = group(lab)?.promoted() {
            lab.note(format!(
                "sees Sentinel promoted the replica (port {port}); {}",
                if has_lock {
                    "it has the lock key"
                } else {
                    "it has no lock key"
                }
            ));
        }
        Ok(())
    }
}

fn group(lab: &mut Lab) -> Result<&mut SentinelLock, String> {
    lab.sentinel
        .as_mut()
        .ok_or_else(|| "no Sentinel group".to_owned())
}

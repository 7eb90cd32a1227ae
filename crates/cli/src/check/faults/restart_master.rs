//! `restart-master` and `restart-master-late`: Redlock with each worker
//! reaching only three masters of five; the master a holder shares with the
//! next worker restarts empty, at once or after 1.5 leases down (Redis's
//! "delayed restart"), so that worker can reach a majority of its own.

use std::time::Duration;

use super::kind::{FaultKind, Needs};
use crate::check::points::Point;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::{Lab, Later};

/// The shared master killed right after a holder took the lock, and
/// restarted empty once it was down for `down(lease)`.
pub struct RestartMaster {
    down: fn(Duration) -> Duration,
}

/// `restart-master`: restarted at once.
pub const AT_ONCE: RestartMaster = RestartMaster {
    down: |_| Duration::ZERO,
};

/// `restart-master-late`: down 1.5 leases first.
pub const LATE: RestartMaster = RestartMaster {
    down: |lease| lease * 3 / 2,
};

impl FaultKind for RestartMaster {
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
        (self.down)(lease)
    }

    fn prepare(&self, lab: &mut Lab) {
        prepare(lab);
    }

    fn on_stopped(&self, lab: &mut Lab, index: usize) -> Result<(), String> {
        restart_shared(lab, index, self.outage(lab.lease))
    }
}

/// Workers reach the masters through proxies, some of them cut for good.
const NEEDS: Needs = Needs {
    clock: false,
    sentinel: false,
    proxies: true,
};

/// Only a Redlock has masters to share.
fn applies(recipe: &Info) -> Result<(), &'static str> {
    if recipe.servers > 1 {
        Ok(())
    } else {
        Err("one lock server, not a Redlock")
    }
}

/// Keeps each first worker away from the masters it must not reach.
fn prepare(lab: &mut Lab) {
    let servers = lab.lock.urls().len();
    for id in 1..=lab.workers_at_start {
        lab.links.keep_apart(id, unreachable_masters(id, servers));
    }
}

/// Restarts empty the master worker `index` shares with another: at once
/// when `outage` is zero, else it stays down that long. Shared with
/// `restart-master-late`.
pub fn restart_shared(lab: &mut Lab, index: usize, outage: Duration) -> Result<(), String> {
    let id = lab.workers[index].id;
    let master = shared_master(id, lab.workers_at_start, lab.lock.urls().len());
    let what = if outage.is_zero() {
        lab.lock.restart(master)?;
        format!("restarts master {master} (held by w{id}) empty")
    } else {
        lab.lock.kill(master)?;
        // Not at the end: bringing a Redlock master back early would break
        // the very rule the run shows; the workers stop without it.
        lab.later(
            Later::after(outage, move |lab| {
                lab.lock.restart(master)?;
                lab.note(format!("master {master} restarted empty"));
                Ok(())
            })
            .blocking(),
        );
        format!("kills master {master} (held by w{id})")
    };
    lab.injected_note(what);
    lab.go_on(index);
    Ok(())
}

/// The masters worker `id` cannot reach: each worker reaches three
/// neighbouring masters of five, starting two further on than the worker
/// before it, so a holder holds exactly a bare majority and shares one
/// master with the next worker.
fn unreachable_masters(id: u32, servers: usize) -> Vec<usize> {
    let reach = reachable_masters(id, servers);
    (0..servers)
        .filter(|index| !reach.contains(index))
        .collect()
}

fn reachable_masters(id: u32, servers: usize) -> Vec<usize> {
    let majority = servers / 2 + 1;
    let first = (id.saturating_sub(1) as usize * 2) % servers.max(1);
    (0..majority).map(|k| (first + k) % servers).collect()
}

/// The one master holder `id` shares with another worker (the next one that
/// shares exactly one): restarted empty, it lets that worker to a majority.
fn shared_master(id: u32, workers: u32, servers: usize) -> usize {
    let mine = reachable_masters(id, servers);
    (1..=workers)
        .filter(|&other| other != id)
        .map(|other| {
            let theirs = reachable_masters(other, servers);
            mine.iter()
                .copied()
                .filter(|master| theirs.contains(master))
                .collect::<Vec<_>>()
        })
        .find(|shared| shared.len() == 1)
        .and_then(|shared| shared.first().copied())
        .unwrap_or(mine[0])
}

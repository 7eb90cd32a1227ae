//! Who believed they held the lock when: a worker *holds* from its
//! `acquired` event until it starts releasing, sees the lock lost, or is
//! killed. The checker judges these intervals and the pictures draw them.

use std::collections::HashMap;

use super::event::{Event, What};

/// One worker's hold: `[from, to)`, monotonic ns.
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    /// The worker.
    pub worker: u32,
    /// When it acquired.
    pub from: u64,
    /// When it stopped believing it held (release, loss seen, killed).
    pub to: u64,
}

/// Every worker's holds, sorted by start.
pub fn holds(events: &[Event], last: u64) -> Vec<Hold> {
    let mut open: HashMap<u32, u64> = HashMap::new();
    let mut holds = Vec::new();
    for event in events {
        let (worker, opens) = match (&event.what, event.w) {
            (What::Acquired { .. }, Some(worker)) => (worker, true),
            (What::Lost | What::ReleaseStart, Some(worker)) => (worker, false),
            (What::Killed { worker }, None) => (*worker, false),
            _ => continue,
        };
        if let Some(from) = open.remove(&worker) {
            holds.push(Hold {
                worker,
                from,
                to: event.t,
            });
        }
        if opens {
            open.insert(worker, event.t);
        }
    }
    holds.extend(open.into_iter().map(|(worker, from)| Hold {
        worker,
        from,
        to: last,
    }));
    holds.sort_by_key(|hold| hold.from);
    holds
}

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

/// Whose lock a worker's successful release deleted, when not its own.
/// The DEL ran between when it was sent (the releaser started releasing,
/// or ran again after a pause) and its answer: the first worker to
/// acquire in that span if any (the lock had expired when it was sent),
/// else the last one to acquire before it was sent.
pub fn key_owner_at_release(events: &[Event], released: &Event) -> Option<u32> {
    let releaser = released.w?;
    let sent = events
        .iter()
        .filter(|event| {
            event.t <= released.t
                && event.w == Some(releaser)
                && matches!(event.what, What::ReleaseStart | What::Continued)
        })
        .map(|event| event.t)
        .max()?;
    let acquirer = |event: &Event| match event.what {
        What::Acquired { .. } => event.w,
        _ => None,
    };
    let during = events
        .iter()
        .filter(|event| event.t > sent && event.t < released.t)
        .find_map(acquirer);
    let owner = during.or_else(|| {
        events
            .iter()
            .filter(|event| event.t < sent)
            .filter_map(acquirer)
            .next_back()
    })?;
    (owner != releaser).then_some(owner)
}

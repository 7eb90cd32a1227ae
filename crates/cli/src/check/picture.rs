//! A stretch of a run as data for a drawing: who believed they held the
//! lock when, the lease each was granted, the writes and how the store took
//! them, and what the lab did. `svg.rs` draws it.

use std::collections::HashMap;
use std::time::Duration;

use super::event::{What, describe};
use super::holds::Hold;
use super::workload::cell::Run;

/// A stretch of a run as drawn by `--svg`: who believed they held the
/// lock when, their leases, their writes and what the lab did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Picture {
    /// The stretch drawn, ms after the run's start.
    pub from_ms: f64,
    /// Its end, ms after the run's start.
    pub to_ms: f64,
    /// One lane per worker seen in the stretch, by worker id.
    pub lanes: Vec<Lane>,
    /// What the lab did, ms after the run's start, and in words.
    pub faults: Vec<(f64, String)>,
}

/// One worker in a [`Picture`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lane {
    /// The worker.
    pub worker: u32,
    /// When it believed it held the lock (ms), and when its lease as
    /// granted at acquisition ran out (renewals may have extended it).
    pub holds: Vec<(f64, f64, f64)>,
    /// Its writes (ms), and what the store made of each.
    pub writes: Vec<(f64, WriteMark)>,
    /// When it was stopped (SIGSTOP) and ran again (ms).
    pub stopped: Vec<(f64, f64)>,
}

/// How the store took a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMark {
    /// Accepted, over the value the writer read.
    Accepted,
    /// Accepted over a value the writer had not read: an update lost.
    LostAnother,
    /// Refused for an old fencing token.
    Refused,
}

fn lease_ns(lease: Duration) -> u64 {
    u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX)
}

/// The stretch `[from, to]` of `run` (monotonic ns), with a margin.
pub fn picture(run: &Run, holds: &[Hold], lease: Duration, from: u64, to: u64) -> Picture {
    let margin = (to.saturating_sub(from) / 10).max(20_000_000);
    let (from, to) = (from.saturating_sub(margin), to + margin);
    let ms = |t: u64| (t as f64 - run.start as f64) / 1e6;
    let inside = |t: u64| t >= from && t <= to;
    let mut lanes: Vec<Lane> = Vec::new();
    let lane = |lanes: &mut Vec<Lane>, worker: u32| -> usize {
        if let Some(index) = lanes.iter().position(|lane| lane.worker == worker) {
            return index;
        }
        lanes.push(Lane {
            worker,
            ..Lane::default()
        });
        lanes.len() - 1
    };
    for hold in holds
        .iter()
        .filter(|hold| hold.from <= to && hold.to >= from)
    {
        let index = lane(&mut lanes, hold.worker);
        let lease_end = hold.from.saturating_add(lease_ns(lease));
        lanes[index]
            .holds
            .push((ms(hold.from), ms(hold.to), ms(lease_end)));
    }
    let mut stopped_at: HashMap<u32, u64> = HashMap::new();
    let mut faults = Vec::new();
    for event in &run.events {
        match (&event.what, event.w) {
            (
                What::Write {
                    read,
                    found,
                    accepted,
                    ..
                },
                Some(worker),
            ) if inside(event.t) => {
                let mark = match (accepted, found == read) {
                    (false, _) => WriteMark::Refused,
                    (true, true) => WriteMark::Accepted,
                    (true, false) => WriteMark::LostAnother,
                };
                let index = lane(&mut lanes, worker);
                lanes[index].writes.push((ms(event.t), mark));
            }
            (What::Stopping { .. }, Some(worker)) => {
                stopped_at.insert(worker, event.t);
            }
            (What::Continued, Some(worker)) => {
                if let Some(since) = stopped_at.remove(&worker)
                    && since <= to
                    && event.t >= from
                {
                    let index = lane(&mut lanes, worker);
                    lanes[index].stopped.push((ms(since), ms(event.t)));
                }
            }
            (
                What::Fault { .. }
                | What::Killed { .. }
                | What::Paused { .. }
                | What::Resumed { .. },
                None,
            ) if inside(event.t) => {
                faults.push((ms(event.t), describe(&event.what)));
            }
            _ => {}
        }
    }
    lanes.sort_by_key(|lane| lane.worker);
    Picture {
        from_ms: ms(from),
        to_ms: ms(to),
        lanes,
        faults,
    }
}

//! A counter-example in words, for the caption under its drawing: who
//! acquired when, who was stopped how long past its lease, what the lab
//! did, and what became of the write that matters, in the order it
//! happened ("w1 acquired at 0.31 s; w1 was stopped at 0.33 s for 1.25 s
//! ...; w2 acquired at 0.82 s while w1 still believed it held the lock;
//! w1's write at 1.59 s was refused by the fence ...").

use std::fmt::Write as _;
use std::time::Duration;

use super::event::{Event, What};
use super::holds::{Hold, key_owner_at_release};

/// The events of a run, to tell a stretch of it.
pub struct Story<'a> {
    /// Every event of the run, sorted by time.
    pub events: &'a [Event],
    /// The run's start, monotonic ns.
    pub start: u64,
    /// The lease the run used.
    pub lease: Duration,
}

/// Fragments of a caption, each at the time it happened.
type Fragments = Vec<(u64, String)>;

impl Story<'_> {
    /// `t` as seconds after the run's start: `1.30 s`.
    fn at(&self, t: u64) -> String {
        format!("{:.2} s", t.saturating_sub(self.start) as f64 / 1e9)
    }

    fn lease_ns(&self) -> u64 {
        u64::try_from(self.lease.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The fragments joined in time order, as one sentence.
    fn sentence(mut fragments: Fragments) -> String {
        fragments.sort_by_key(|(t, _)| *t);
        let mut text = fragments
            .into_iter()
            .map(|(_, fragment)| fragment)
            .collect::<Vec<_>>()
            .join("; ");
        text.push('.');
        text
    }

    /// When `worker` stopped itself (or was stopped) during `[from, to]`,
    /// how long for, and how far past the lease it was granted at `acquired`.
    fn stopped(&self, worker: u32, acquired: u64, from: u64, to: u64) -> Option<(u64, String)> {
        let stop = self.events.iter().find(|event| {
            event.w == Some(worker)
                && event.t >= from
                && event.t <= to
                && matches!(event.what, What::Stopping { .. })
        })?;
        let went_on = self
            .events
            .iter()
            .find(|event| {
                event.t > stop.t && event.w == Some(worker) && event.what == What::Continued
            })
            .map(|event| event.t);
        let mut text = format!("w{worker} was stopped at {}", self.at(stop.t));
        match went_on {
            Some(went_on) => {
                let _ = write!(text, " for {:.2} s", (went_on - stop.t) as f64 / 1e9);
                let lease_end = acquired.saturating_add(self.lease_ns());
                if went_on > lease_end {
                    let _ = write!(
                        text,
                        ", {:.2} s past the lease it was granted at acquisition",
                        (went_on - lease_end) as f64 / 1e9
                    );
                }
            }
            None => text.push_str(" until the end of the run"),
        }
        Some((stop.t, text))
    }

    /// What the lab did to the servers or the network, or killed, in `[from, to]`.
    fn lab(&self, from: u64, to: u64) -> Fragments {
        self.events
            .iter()
            .filter(|event| event.w.is_none() && event.t >= from && event.t <= to)
            .filter_map(|event| {
                let what = match &event.what {
                    What::Killed { worker } => format!("killed w{worker} (SIGKILL)"),
                    What::Fault { what } => what.clone(),
                    _ => return None,
                };
                Some((event.t, format!("the lab at {}: {what}", self.at(event.t))))
            })
            .collect()
    }

    /// A write in words, from its writer's side.
    fn write(&self, write: &Event) -> Option<(u64, String)> {
        let (
            What::Write {
                token,
                read,
                found,
                accepted,
                ..
            },
            Some(worker),
        ) = (&write.what, write.w)
        else {
            return None;
        };
        let at = self.at(write.t);
        let text = match (accepted, found == read) {
            (false, _) => format!(
                "w{worker}'s write at {at} was refused by the fence (token {} is older than one the store accepted)",
                token.map_or_else(|| "-".to_owned(), |token| token.to_string())
            ),
            (true, false) => format!(
                "w{worker}'s write of {} at {at} was accepted over {found}, a value it had not read: an update is lost",
                read + 1
            ),
            (true, true) => format!("w{worker}'s write at {at} was accepted"),
        };
        Some((write.t, text))
    }

    /// Two holders at once: `a` held, `b` acquired before `a` let go.
    /// `write` is `a`'s write after `b` acquired, if it made one.
    pub fn overlap(&self, a: Hold, b: Hold, write: Option<&Event>) -> String {
        let mut fragments = vec![
            (
                a.from,
                format!("w{} acquired at {}", a.worker, self.at(a.from)),
            ),
            (
                b.from,
                format!(
                    "w{} acquired at {} while w{} still believed it held the lock",
                    b.worker,
                    self.at(b.from),
                    a.worker
                ),
            ),
        ];
        fragments.extend(self.stopped(a.worker, a.from, a.from, b.from));
        fragments.extend(self.lab(a.from, b.from));
        // A third worker's release that deleted `a`'s lock let `b` in.
        for release in self.events.iter().filter(|event| {
            event.t >= a.from
                && event.t <= b.from
                && event.what == (What::Released { ok: true })
                && event.w.is_some_and(|worker| worker != a.worker)
        }) {
            let Some(releaser) = release.w else { continue };
            if key_owner_at_release(self.events, release) != Some(a.worker) {
                continue;
            }
            let acquired = self
                .events
                .iter()
                .rev()
                .find(|event| {
                    event.t < release.t
                        && event.w == Some(releaser)
                        && matches!(event.what, What::Acquired { .. })
                })
                .map_or(a.from, |event| event.t);
            fragments.extend(self.stopped(releaser, acquired, acquired, release.t));
            fragments.push((
                release.t,
                format!(
                    "w{releaser}'s release at {} deleted w{}'s lock",
                    self.at(release.t),
                    a.worker
                ),
            ));
        }
        match write.and_then(|write| self.write(write)) {
            Some(write) => fragments.push(write),
            None => fragments.push((
                a.to,
                format!(
                    "w{} believed it held the lock until {}",
                    a.worker,
                    self.at(a.to)
                ),
            )),
        }
        Self::sentence(fragments)
    }

    /// An update lost: `write` overwrote a value its writer had not read,
    /// made by `maker` (when found).
    pub fn lost_update(&self, since: u64, write: &Event, maker: Option<&Event>) -> String {
        let Some(worker) = write.w else {
            return String::new();
        };
        let mut fragments = vec![(since, format!("w{worker} acquired at {}", self.at(since)))];
        if let Some(read) = self.events.iter().find(|event| {
            event.w == Some(worker)
                && event.t >= since
                && event.t <= write.t
                && matches!(event.what, What::Read { .. })
        }) && let What::Read { value } = read.what
        {
            fragments.push((
                read.t,
                format!("w{worker} read {value} at {}", self.at(read.t)),
            ));
        }
        if let Some(maker) = maker
            && let (What::Write { read, .. }, Some(by)) = (&maker.what, maker.w)
        {
            fragments.push((
                maker.t,
                format!("w{by} wrote {} at {}", read + 1, self.at(maker.t)),
            ));
        }
        fragments.extend(self.stopped(worker, since, since, write.t));
        fragments.extend(self.lab(since, write.t));
        fragments.extend(self.write(write));
        Self::sentence(fragments)
    }

    /// A write accepted from `worker`, which acquired at `since`, after
    /// `by` acquired at `by_t`.
    pub fn stale_write(&self, since: u64, by: u32, by_t: u64, write: &Event) -> String {
        let Some(worker) = write.w else {
            return String::new();
        };
        let mut fragments = vec![
            (since, format!("w{worker} acquired at {}", self.at(since))),
            (
                by_t,
                format!(
                    "w{by} acquired at {} while w{worker} still believed it held the lock",
                    self.at(by_t)
                ),
            ),
        ];
        fragments.extend(self.stopped(worker, since, since, write.t));
        fragments.extend(self.lab(since, write.t));
        fragments.push((
            write.t,
            format!(
                "w{worker}'s write at {} was accepted anyway: a stale write",
                self.at(write.t)
            ),
        ));
        Self::sentence(fragments)
    }

    /// Nobody acquired for `gap` ns from `from` (to the run's end when `to_end`).
    pub fn stuck(&self, from: u64, gap: u64, to_end: bool) -> String {
        let mut fragments = vec![(
            from,
            format!(
                "nobody acquired the lock for {:.2} s from {}{}",
                gap as f64 / 1e9,
                self.at(from),
                if to_end {
                    ", until the end of the run"
                } else {
                    ""
                }
            ),
        )];
        if let Some(last) = self.events.iter().rev().find(|event| {
            event.t <= from
                && event.t + 1_000_000 >= from
                && matches!(event.what, What::Acquired { .. })
        }) && let Some(worker) = last.w
        {
            fragments.push((
                last.t.saturating_sub(1),
                format!("w{worker} acquired at {}", self.at(last.t)),
            ));
        }
        let before = from.saturating_sub(self.lease_ns());
        fragments.extend(self.lab(before, from + gap));
        Self::sentence(fragments)
    }
}

//! From a run's timeline to figures and counter-examples.
//!
//! A worker *holds* from its `acquired` event until it starts releasing,
//! sees the lock lost, or is killed. Every process reads one system-wide
//! monotonic clock, so these intervals can be compared across workers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::caption::Story;
use super::event::{Event, What, describe};
use super::holds::{holds, key_owner_at_release};
use super::picture::{Picture, picture};
use super::workload::cell::Run;

/// The figures of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// Critical sections that reached their write.
    pub sections: u64,
    /// Pairs of workers that held the lock at the same time.
    pub overlaps: u64,
    /// Accepted writes that overwrote a value the writer had not read.
    pub lost_updates: u64,
    /// Accepted writes from a holder whose lock another worker had taken since.
    pub stale_accepted: u64,
    /// Writes the store refused for an old fencing token.
    pub stale_rejected: u64,
    /// Longest time in which nobody acquired the lock, in milliseconds.
    pub longest_no_acquire_ms: u64,
    /// When that longest stretch began, in milliseconds after the run's start.
    pub no_acquire_from_ms: u64,
    /// Whether that longest stretch lasted until the end of the run.
    pub no_acquire_to_end: bool,
    /// Calls to Redis that failed.
    pub errors: u64,
    /// When each injection of the fault took effect, in milliseconds after
    /// the run's start (for faults a worker does to itself: when the lab
    /// paused or killed it at its point, which depends on scheduling).
    pub faults_at_ms: Vec<u64>,
}

/// A kind of violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Violation {
    /// Two holders at once.
    Overlap,
    /// An update overwritten.
    LostUpdate,
    /// A write accepted from an overtaken holder.
    StaleWrite,
    /// Nobody acquired for longer than the fault explains.
    Stuck,
}

/// The first instance of a violation, as a short timeline.
#[derive(Debug, Clone, Serialize)]
pub struct CounterExample {
    /// What was violated.
    pub violation: Violation,
    /// One line per event, time relative to the start of the run.
    pub timeline: Vec<String>,
    /// What happened, in words (the caption under its drawing in `--html`).
    pub caption: String,
    /// The same stretch of the run, for drawing (`--svg`, `--html`).
    #[serde(skip)]
    pub picture: Option<Picture>,
}

/// Figures and counter-examples of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Findings {
    /// The figures.
    pub figures: Figures,
    /// Each violation seen, with its first instance.
    pub counter_examples: Vec<CounterExample>,
}

impl Findings {
    /// The violations seen.
    pub fn violations(&self) -> Vec<Violation> {
        self.counter_examples
            .iter()
            .map(|example| example.violation)
            .collect()
    }
}

/// Checks a run. `stuck_after` is the longest no-acquire stretch the
/// recipe and fault explain.
pub fn check(run: &Run, stuck_after: Duration, lease: Duration) -> Findings {
    let events = &run.events;
    let last = events.last().map_or(run.end, |event| event.t.max(run.end));
    let holds = holds(events, last);
    let acquisitions: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|event| match (&event.what, event.w) {
            (What::Acquired { .. }, Some(worker)) => Some((event.t, worker)),
            _ => None,
        })
        .collect();
    let mut findings = Findings::default();
    let figures = &mut findings.figures;
    let timeline = Timeline {
        events,
        start: run.start,
    };
    let draw = |from: u64, to: u64| Some(picture(run, &holds, lease, from, to));
    let story = Story {
        events,
        start: run.start,
        lease,
    };

    // Overlaps: holds sorted by start; each overlapping later one counts.
    let mut first_overlap = None;
    for (index, hold) in holds.iter().enumerate() {
        for later in holds[index + 1..]
            .iter()
            .take_while(|later| later.from < hold.to)
        {
            if later.worker != hold.worker {
                figures.overlaps += 1;
                first_overlap.get_or_insert((*hold, *later));
            }
        }
    }
    if let Some((a, b)) = first_overlap {
        // The overtaken holder's write, if it made one before letting go:
        // how the store took it ends the story (a fence refuses it).
        let write = events.iter().find(|event| {
            event.w == Some(a.worker)
                && event.t > b.from
                && event.t <= a.to
                && matches!(event.what, What::Write { .. })
        });
        let refused = write.is_some_and(|write| {
            matches!(
                write.what,
                What::Write {
                    accepted: false,
                    ..
                }
            )
        });
        let to = write.map_or(a.to.min(b.to), |write| write.t);
        findings.counter_examples.push(CounterExample {
            violation: Violation::Overlap,
            timeline: timeline.window(b.from, a.from, to, &[], &[], !refused),
            caption: story.overlap(a, b, write),
            picture: draw(a.from, a.to.max(b.to)),
        });
    }

    // Writes: lost updates, stale writes accepted, writes refused.
    let mut acquired_at: HashMap<u32, u64> = HashMap::new();
    let mut first_lost = None;
    let mut first_stale = None;
    for event in events {
        let Some(worker) = event.w else { continue };
        match &event.what {
            What::Acquired { .. } => {
                acquired_at.insert(worker, event.t);
            }
            What::Error { .. } => figures.errors += 1,
            What::Write {
                sent,
                read,
                found,
                accepted,
                ..
            } => {
                figures.sections += 1;
                if !accepted {
                    figures.stale_rejected += 1;
                    continue;
                }
                let since = acquired_at.get(&worker).copied().unwrap_or(0);
                if found != read {
                    figures.lost_updates += 1;
                    first_lost.get_or_insert((since, event, *found, worker));
                }
                let overtaken = acquisitions[acquisitions.partition_point(|&(t, _)| t <= since)..]
                    .iter()
                    // Overtaken before it even sent the write.
                    .take_while(|&&(t, _)| t < *sent)
                    .find(|&&(_, other)| other != worker);
                if let Some(&(by_t, by)) = overtaken {
                    figures.stale_accepted += 1;
                    first_stale.get_or_insert((since, by_t, event, [worker, by]));
                }
            }
            _ => {}
        }
    }
    if let Some((since, write, found, writer_of_first_lost)) = first_lost {
        let at = write.t;
        let writer_of_first_lost = Some(writer_of_first_lost);
        // Start at the section whose write made the value that got lost.
        let maker = events.iter().rev().find(|event| {
            event.t < at
                && matches!(event.what, What::Write { read, accepted: true, .. } if read + 1 == found)
        });
        let mut involved: Vec<u32> = Vec::new();
        involved.extend(maker.and_then(|write| write.w));
        involved.extend(writer_of_first_lost);
        let from = maker
            .and_then(|write| {
                let worker = write.w?;
                events
                    .iter()
                    .rev()
                    .find(|event| {
                        event.t <= write.t
                            && event.w == Some(worker)
                            && matches!(event.what, What::Acquired { .. })
                    })
                    .map(|acquired| acquired.t)
            })
            .map_or(since, |t| t.min(since));
        findings.counter_examples.push(CounterExample {
            violation: Violation::LostUpdate,
            timeline: timeline.window(at, from, at, &involved, &[], true),
            caption: story.lost_update(since, write, maker),
            picture: draw(from, at),
        });
    }
    if let Some((since, by_t, write, involved)) = first_stale {
        let at = write.t;
        findings.counter_examples.push(CounterExample {
            violation: Violation::StaleWrite,
            timeline: timeline.window(at, since, at.max(by_t), &involved, &[], true),
            caption: story.stale_write(since, involved[1], by_t, write),
            picture: draw(since, at.max(by_t)),
        });
    }

    // Liveness: the longest stretch with no acquisition, within the run.
    let mut previous = run.start;
    let mut longest = (0, run.start, false);
    let inside = acquisitions
        .iter()
        .map(|&(t, _)| t)
        .filter(|&t| t >= run.start && t <= run.end);
    for t in inside.chain(std::iter::once(run.end)) {
        let gap = t.saturating_sub(previous);
        if gap > longest.0 {
            longest = (gap, previous, t == run.end);
        }
        previous = t;
    }
    figures.longest_no_acquire_ms = longest.0 / 1_000_000;
    figures.no_acquire_from_ms = (longest.1 - run.start) / 1_000_000;
    figures.no_acquire_to_end = longest.2;
    figures.faults_at_ms = run
        .injections
        .iter()
        .map(|&t| t.saturating_sub(run.start) / 1_000_000)
        .collect();
    if Duration::from_nanos(longest.0) > stuck_after {
        let (gap, from, to_end) = longest;
        let note = format!(
            "nobody acquired for {:.1}s{}",
            gap as f64 / 1e9,
            if to_end {
                ", until the end of the run"
            } else {
                ""
            }
        );
        findings.counter_examples.push(CounterExample {
            violation: Violation::Stuck,
            timeline: timeline.window(
                from + gap,
                from.saturating_sub(1),
                from + gap,
                &[],
                &[note],
                true,
            ),
            caption: story.stuck(from, gap, to_end),
            picture: draw(from.saturating_sub(1_000_000), from + gap),
        });
    }
    findings
}

/// Renders events as counter-example lines.
struct Timeline<'a> {
    events: &'a [Event],
    start: u64,
}

/// Longest counter-example, in lines.
const MAX_LINES: usize = 16;

impl Timeline<'_> {
    /// The telling events in `[from, to]`, plus (when `follow`) each
    /// worker's next event after `to` and the lab's next fault, plus
    /// `notes` at `at`.
    fn window(
        &self,
        at: u64,
        from: u64,
        to: u64,
        only: &[u32],
        notes: &[String],
        follow: bool,
    ) -> Vec<String> {
        let involved = |event: &Event| {
            only.is_empty() || worker_of(event).is_none_or(|worker| only.contains(&worker))
        };
        // Each worker's first error in the window says enough.
        let mut erred = Vec::new();
        let mut first_error = |event: &Event| match (&event.what, event.w) {
            (What::Error { .. }, Some(worker)) if !erred.contains(&worker) => {
                erred.push(worker);
                true
            }
            _ => false,
        };
        let mut lines: Vec<(u64, String)> = self
            .events
            .iter()
            .filter(|event| event.t >= from && event.t <= to && involved(event))
            .filter(|event| telling(event) || first_error(event))
            .map(|event| (event.t, self.line(event)))
            .collect();
        // A worker that runs again in the window, or ran again just before
        // it and acts in it: show where it stopped and when it went on.
        let mut stopped_before = Vec::new();
        for event in self.events.iter().filter(|event| {
            event.t >= from && event.t <= to && involved(event) && event.what != What::Continued
        }) {
            let Some(worker) = event.w else { continue };
            if stopped_before.contains(&worker) {
                continue;
            }
            stopped_before.push(worker);
            let last_before = self
                .events
                .iter()
                .rev()
                .find(|earlier| earlier.t < from && earlier.w == Some(worker));
            if let Some(continued) = last_before.filter(|last| last.what == What::Continued) {
                lines.push((continued.t, self.line(continued)));
            }
        }
        let resumed: Vec<(u32, u64)> = self
            .events
            .iter()
            .filter(|event| event.t <= to && event.what == What::Continued)
            .filter(|event| {
                event.t >= from
                    || event
                        .w
                        .is_some_and(|worker| stopped_before.contains(&worker))
            })
            .filter_map(|event| Some((event.w?, event.t)))
            .collect();
        for (worker, at) in resumed {
            let stop = self.events.iter().rev().find(|event| {
                event.t < from.min(at)
                    && event.w == Some(worker)
                    && matches!(event.what, What::Stopping { .. })
            });
            if let Some(stop) = stop {
                lines.push((stop.t, self.line(stop)));
            }
        }
        // How the workers involved went on right after.
        let mut seen = Vec::new();
        for event in self
            .events
            .iter()
            .filter(|event| follow && event.t > to && telling(event) && involved(event))
        {
            if let Some(worker) = event.w
                && !seen.contains(&worker)
                && lines.len() + seen.len() < MAX_LINES
            {
                seen.push(worker);
                lines.push((event.t, self.line(event)));
            }
            if seen.len() >= 2 {
                break;
            }
        }
        // The lab's next fault after the window: the lab notices a Sentinel
        // promotion by polling, often after the new holder already got in.
        if let Some(event) = self.events.iter().find(|event| {
            follow && event.t > to && event.w.is_none() && matches!(event.what, What::Fault { .. })
        }) {
            lines.push((event.t, self.line(event)));
        }
        for note in notes {
            lines.push((at, format!("{}  {note}", self.stamp(at))));
        }
        lines.sort_by_key(|(t, _)| *t);
        elide(lines.into_iter().map(|(_, line)| line).collect())
    }

    fn stamp(&self, t: u64) -> String {
        let seconds = (t as f64 - self.start as f64) / 1e9;
        format!("{seconds:>+8.3}s")
    }

    fn line(&self, event: &Event) -> String {
        let who = event
            .w
            .map_or_else(|| "lab".to_owned(), |worker| format!("w{worker}"));
        let mut text = describe(&event.what);
        if event.what == (What::Released { ok: true })
            && let Some(victim) = key_owner_at_release(self.events, event)
        {
            // A release that deleted someone else's lock is the bug to see.
            let _ = write!(text, ": that was w{victim}'s lock");
        }
        format!("{}  {who:<4} {text}", self.stamp(event.t))
    }
}

/// Shortens a long counter-example to its head and tail, keeping the lab's
/// own lines from the middle: a fault (a promotion, a restart) is what the
/// reader needs to see, however many sections came before it.
fn elide(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() <= MAX_LINES {
        return lines;
    }
    let tail = lines.split_off(lines.len() - MAX_LINES / 2);
    let middle = lines.split_off(MAX_LINES / 2 - 1);
    for line in middle.into_iter().filter(|line| is_lab_line(line)) {
        lines.push(SKIPPED.to_owned());
        lines.push(line);
    }
    lines.push(SKIPPED.to_owned());
    lines.extend(tail);
    lines
}

/// Stands for the lines left out of a counter-example.
const SKIPPED: &str = "       ...";

/// Whether a timeline line is the lab's (a fault) rather than a worker's.
fn is_lab_line(line: &str) -> bool {
    line.split_whitespace().nth(1) == Some("lab")
}

/// Whether an event helps tell what happened.
fn telling(event: &Event) -> bool {
    !matches!(
        event.what,
        What::AcquireStart | What::Ready | What::Error { .. }
    )
}

/// The worker an event is about: its author, or the one the lab acted on.
fn worker_of(event: &Event) -> Option<u32> {
    match event.what {
        What::Paused { worker } | What::Resumed { worker } | What::Killed { worker } => {
            Some(worker)
        }
        _ => event.w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(t_ms: u64, w: u32, what: What) -> Event {
        Event {
            t: t_ms * MS,
            w: Some(w),
            what,
        }
    }

    fn section(w: u32, from_ms: u64, to_ms: u64, read: i64, found: i64) -> Vec<Event> {
        vec![
            at(from_ms, w, What::Acquired { token: None }),
            at(from_ms + 1, w, What::Read { value: read }),
            at(
                to_ms - 1,
                w,
                What::Write {
                    sent: (to_ms - 2) * MS,
                    token: None,
                    read,
                    found,
                    accepted: true,
                },
            ),
            at(to_ms, w, What::ReleaseStart),
        ]
    }

    #[test]
    fn a_long_timeline_keeps_the_lab_lines_from_its_middle() {
        let mut lines: Vec<String> = (0..40)
            .map(|i| format!("  +0.{i:03}s  w1   wrote {i}"))
            .collect();
        lines[20] = "  +0.020s  lab  Sentinel promoted the replica".to_owned();
        let short = elide(lines);
        assert!(short.len() <= MAX_LINES + 2, "{short:?}");
        assert!(
            short.iter().any(|line| line.contains("Sentinel promoted")),
            "{short:?}"
        );
        assert_eq!(short[0], "  +0.000s  w1   wrote 0");
        assert_eq!(short.last().unwrap(), "  +0.039s  w1   wrote 39");
    }

    fn run(mut events: Vec<Event>, end_ms: u64) -> Run {
        events.sort_by_key(|event| event.t);
        Run {
            events,
            start: 0,
            end: end_ms * MS,
            injections: Vec::new(),
        }
    }

    #[test]
    fn holders_one_after_another_show_no_violation() {
        let mut events = section(1, 0, 10, 0, 0);
        events.extend(section(2, 11, 20, 1, 1));
        let findings = check(
            &run(events, 21),
            Duration::from_secs(1),
            Duration::from_millis(500),
        );
        assert!(findings.violations().is_empty(), "{findings:?}");
        assert_eq!(findings.figures.sections, 2);
    }

    #[test]
    fn two_holders_at_once_are_an_overlap_a_stale_write_and_a_lost_update() {
        // w2 takes the lock while w1 holds it; w1's write then overwrites w2's.
        let mut events = section(1, 0, 30, 0, 1);
        events.extend(section(2, 5, 20, 0, 0));
        let findings = check(
            &run(events, 31),
            Duration::from_secs(1),
            Duration::from_millis(500),
        );
        assert_eq!(findings.figures.overlaps, 1);
        assert_eq!(findings.figures.lost_updates, 1);
        assert_eq!(findings.figures.stale_accepted, 1);
        assert_eq!(
            findings.violations(),
            [
                Violation::Overlap,
                Violation::LostUpdate,
                Violation::StaleWrite
            ]
        );
        assert!(!findings.counter_examples[0].timeline.is_empty());
    }

    #[test]
    fn a_killed_holder_holds_no_more_and_a_long_silence_is_stuck() {
        let mut events = vec![at(0, 1, What::Acquired { token: None })];
        events.push(Event {
            t: 5 * MS,
            w: None,
            what: What::Killed { worker: 1 },
        });
        events.extend(section(2, 10, 20, 0, 0));
        let mut killed = run(events, 3_000);
        killed.injections.push(5 * MS);
        let findings = check(&killed, Duration::from_secs(1), Duration::from_millis(500));
        assert_eq!(findings.figures.overlaps, 0);
        assert!(findings.figures.no_acquire_to_end);
        assert_eq!(findings.figures.no_acquire_from_ms, 10);
        assert_eq!(findings.figures.faults_at_ms, [5]);
        assert_eq!(findings.violations(), [Violation::Stuck]);
    }

    #[test]
    fn a_release_resumed_just_before_the_overlap_still_shows_where_it_stopped() {
        // w1 stops between GET and DEL; the lab lets it run again just
        // before w2 takes the expired lock, so w1's DEL takes w2's lock.
        let mut events = section(1, 0, 10, 0, 0);
        events.push(at(
            11,
            1,
            What::Stopping {
                point: "between".to_owned(),
            },
        ));
        events.push(at(600, 1, What::Continued));
        events.push(at(601, 2, What::Acquired { token: None }));
        events.push(at(602, 2, What::Read { value: 1 }));
        events.push(at(603, 1, What::Released { ok: true }));
        events.extend(section(1, 604, 620, 1, 1));
        events.push(at(
            625,
            2,
            What::Write {
                sent: 624 * MS,
                token: None,
                read: 1,
                found: 2,
                accepted: true,
            },
        ));
        events.push(at(630, 2, What::ReleaseStart));
        let findings = check(
            &run(events, 700),
            Duration::from_secs(1),
            Duration::from_millis(500),
        );
        assert_eq!(findings.figures.overlaps, 1, "{findings:?}");
        let timeline = findings.counter_examples[0].timeline.join("\n");
        assert!(timeline.contains("stops itself at between"), "{timeline}");
        assert!(timeline.contains("runs again"), "{timeline}");
        assert!(timeline.contains("that was w2's lock"), "{timeline}");
    }

    #[test]
    fn a_refused_write_is_counted_and_is_no_violation() {
        let mut events = section(1, 0, 10, 0, 0);
        events.push(at(
            12,
            3,
            What::Write {
                sent: 11 * MS,
                token: Some(1),
                read: 0,
                found: 1,
                accepted: false,
            },
        ));
        let findings = check(
            &run(events, 20),
            Duration::from_secs(1),
            Duration::from_millis(500),
        );
        assert_eq!(findings.figures.stale_rejected, 1);
        assert_eq!(findings.figures.lost_updates, 0);
    }

    #[test]
    fn a_fenced_overlap_is_told_up_to_the_refused_write_and_in_words() {
        // w1 stops before its write past its lease; w2 acquires, writes and
        // goes on; w1 runs again and the store refuses its old token.
        let mut events = vec![
            at(0, 1, What::Acquired { token: Some(1) }),
            at(1, 1, What::Read { value: 0 }),
            at(
                2,
                1,
                What::Stopping {
                    point: "before-write".to_owned(),
                },
            ),
            at(1_600, 1, What::Continued),
            at(
                1_601,
                1,
                What::Write {
                    sent: 1_600 * MS,
                    token: Some(1),
                    read: 0,
                    found: 1,
                    accepted: false,
                },
            ),
            at(1_602, 1, What::ReleaseStart),
            at(1_700, 2, What::Acquired { token: Some(3) }),
            at(1_750, 2, What::ReleaseStart),
        ];
        events.extend(section(2, 600, 620, 0, 0));
        let findings = check(
            &run(events, 2_000),
            Duration::from_secs(10),
            Duration::from_millis(500),
        );
        assert_eq!(findings.violations(), [Violation::Overlap]);
        let overlap = &findings.counter_examples[0];
        let last = overlap.timeline.last().expect("a timeline");
        assert!(last.contains("w1   write of 1 REJECTED"), "{overlap:#?}");
        assert!(
            overlap.caption.contains(
                "w1 was stopped at 0.00 s for 1.60 s, 1.10 s past the lease it was granted at acquisition; \
                 w2 acquired at 0.60 s while w1 still believed it held the lock"
            ),
            "{}",
            overlap.caption
        );
        assert!(
            overlap
                .caption
                .ends_with("w1's write at 1.60 s was refused by the fence (token 1 is older than one the store accepted)."),
            "{}",
            overlap.caption
        );
    }
}

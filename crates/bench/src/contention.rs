//! Measures 2 and 3: 16 waiters looping on one key, in one client process
//! or spread over 4; hand-off to another waiter, longest wait, fairness.

use std::time::Duration;

use crate::contender::Kind;
use crate::handoff::HandoffStats;
use crate::harness::Bench;
use crate::point;
use crate::report::{Section, Table};
use crate::stats::Summary;

const WAITERS: u32 = 16;

/// A table row: label, how to read the figure, decimals shown.
type FigureRow = (&'static str, fn(&HandoffStats) -> f64, usize);
const KINDS: [Kind; 4] = [Kind::Redlatch, Kind::Fair, Kind::Rslock, Kind::Redlock];
/// Goals of the default lock.
const GOAL_P99_US: f64 = 1_000.0;
const GOAL_LONGEST_WAIT_MS: f64 = 50.0;
const GOAL_PER_WAITER_RATIO: f64 = 2.0;

pub async fn measure_one_process(bench: &Bench) -> Result<Section, String> {
    let window = bench.settings.headline_window;
    let results = run(bench, 1, WAITERS, window).await?;
    let mut section = Section::new(
        "2. Contention: 16 waiters in one process, one key",
        format!(
            "16 tasks on one client loop acquire → release on one key for {:.1} s with nothing \
             in between. Hand-off counts only acquisitions where the holder changed: the next \
             holder's acquire returning minus the previous holder's release returning. Longest \
             wait: the longest single acquire call (one still waiting at the end counts until \
             the end). FIFO violations: acquisitions granted while a waiter that called over 1 ms \
             earlier was still waiting (calls closer than that may reach Redis in either order).",
            window.as_secs_f64()
        ),
    );
    fill(&mut section, &results);
    Ok(section)
}

pub async fn measure_processes(bench: &Bench) -> Result<Section, String> {
    let window = bench.settings.contend_window;
    let results = run(bench, 4, WAITERS / 4, window).await?;
    let mut section = Section::new(
        "3. Contention: 16 waiters over 4 client processes, one key",
        format!(
            "As measure 2, with 4 waiters in each of 4 client processes (one client each), \
             {:.1} s. Timestamps are CLOCK_MONOTONIC, shared by every process.",
            window.as_secs_f64()
        ),
    );
    fill(&mut section, &results);
    Ok(section)
}

/// Runs every contender `runs` times.
pub async fn run(
    bench: &Bench,
    processes: u32,
    waiters_each: u32,
    window: Duration,
) -> Result<Vec<(Kind, Vec<HandoffStats>)>, String> {
    let url = bench.url();
    let mut results: Vec<(Kind, Vec<HandoffStats>)> =
        KINDS.iter().map(|kind| (*kind, Vec::new())).collect();
    for run in 0..bench.settings.runs {
        for (kind, stats) in &mut results {
            eprintln!("  run {} {}", run + 1, kind.label());
            stats.push(point::contend(*kind, &url, processes, waiters_each, window).await?);
        }
    }
    Ok(results)
}

/// Figure rows, one column per contender, then the goals.
fn fill(section: &mut Section, results: &[(Kind, Vec<HandoffStats>)]) {
    let mut headers = vec!["figure"];
    headers.extend(results.iter().map(|(kind, _)| kind.label()));
    let mut table = Table::new(&headers);
    let rows: [FigureRow; 12] = [
        ("acquisitions/s", |s| s.acquisitions_per_sec, 0),
        (
            "share of acquisitions handed to another waiter",
            |s| s.handoff_share,
            2,
        ),
        (
            "hand-off to another waiter p50 (µs)",
            |s| s.handoff_p50_us,
            0,
        ),
        (
            "hand-off to another waiter p99 (µs)",
            |s| s.handoff_p99_us,
            0,
        ),
        (
            "hand-off from the release call, p50 (µs)",
            |s| s.from_call_p50_us,
            0,
        ),
        (
            "hand-off from the release call, p99 (µs)",
            |s| s.from_call_p99_us,
            0,
        ),
        ("longest wait (ms)", |s| s.longest_wait_ms, 1),
        ("acquisitions per waiter, min", |s| s.per_waiter_min, 0),
        ("acquisitions per waiter, max", |s| s.per_waiter_max, 0),
        ("per waiter max/min", |s| s.per_waiter_ratio, 2),
        ("FIFO violations", |s| s.fifo_violations, 0),
        ("errors", |s| s.errors, 0),
    ];
    for (label, figure, decimals) in rows {
        let mut cells = vec![label.to_owned()];
        for (_, stats) in results {
            cells.push(show(
                Summary::of(stats.iter().map(figure)),
                stats,
                figure,
                decimals,
            ));
        }
        table.row(cells);
    }
    section.tables.push(table);

    if let Some((_, fair)) = results.iter().find(|(kind, _)| *kind == Kind::Fair) {
        let violations: f64 = fair.iter().map(|s| s.fifo_violations).sum();
        section.notes.push(format!(
            "Fair lock, strict FIFO: {} ({violations:.0} FIFO violations over {} runs).",
            if violations == 0.0 { "met" } else { "not met" },
            fair.len()
        ));
    }
    let ours = &results[0].1;
    let mut ratios = Table::new(&[
        "redlatch ÷ peer, same run",
        "acquisitions/s",
        "hand-off p99 (peer ÷ redlatch)",
        "longest wait (peer ÷ redlatch)",
    ]);
    for (kind, theirs) in results.iter().filter(|(kind, _)| *kind != Kind::Redlatch) {
        let per_run = |f: fn(&HandoffStats) -> f64, invert: bool| {
            Summary::of(ours.iter().zip(theirs).map(
                |(a, b)| {
                    if invert { f(b) / f(a) } else { f(a) / f(b) }
                },
            ))
            .show(2)
        };
        ratios.row(vec![
            kind.label().to_owned(),
            per_run(|s| s.acquisitions_per_sec, false),
            per_run(|s| s.handoff_p99_us, true),
            per_run(|s| s.longest_wait_ms, true),
        ]);
    }
    section.tables.push(ratios);

    let median = |f: fn(&HandoffStats) -> f64| Summary::of(ours.iter().map(f)).median;
    let p99 = median(|s| s.handoff_p99_us);
    let longest = median(|s| s.longest_wait_ms);
    let fairness = median(|s| s.per_waiter_ratio);
    let verdict = |ok: bool| if ok { "met" } else { "not met" };
    section.notes.push(format!(
        "redlatch goals: hand-off p99 ≤ 1 ms: {} ({:.0} µs); longest wait ≤ 50 ms: {} ({:.1} ms); per-waiter max/min ≤ 2: {} ({:.2}).",
        verdict(p99 <= GOAL_P99_US),
        p99,
        verdict(longest <= GOAL_LONGEST_WAIT_MS),
        longest,
        verdict(fairness <= GOAL_PER_WAITER_RATIO),
        fairness
    ));
}

/// A summary, except that a ratio made infinite by a waiter that never got
/// the lock reads as such.
pub fn show(
    summary: Summary,
    stats: &[HandoffStats],
    figure: fn(&HandoffStats) -> f64,
    decimals: usize,
) -> String {
    let starved = stats.iter().filter(|s| figure(s).is_infinite()).count();
    match starved {
        0 => summary.show(decimals),
        n if n == stats.len() => "∞ (a waiter never got it)".to_owned(),
        n => format!("{} (∞ in {n} runs)", summary.show(decimals)),
    }
}

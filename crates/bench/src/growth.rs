//! Measure 6: cost as work grows: cycles/s and hand-off latency at 1, 16,
//! 64, 256 tasks in one client process, and 16 tasks in each of 1, 4, 16
//! client processes.

use crate::contender::Kind;
use crate::contention;
use crate::handoff::HandoffStats;
use crate::harness::Bench;
use crate::point;
use crate::report::{Section, Table};
use crate::stats::Summary;
use crate::uncontended::ratio;

/// (client processes, tasks per process)
const POINTS: [(u32, u32); 6] = [(1, 1), (1, 16), (1, 64), (1, 256), (4, 16), (16, 16)];

#[derive(Default)]
struct Point {
    ours: Vec<f64>,
    raw: Vec<f64>,
    contended: Vec<HandoffStats>,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let url = bench.url();
    let mut points: Vec<Point> = POINTS.iter().map(|_| Point::default()).collect();
    for run in 0..bench.settings.runs {
        for ((processes, tasks), point) in POINTS.iter().zip(&mut points) {
            eprintln!("  run {} {processes} × {tasks}", run + 1);
            // Shorter windows than measures 1-3: many points, and the
            // shape of the curve matters more here than each figure.
            let window = bench.settings.window / 2;
            let ours = point::cycles(Kind::Redlatch, &url, *processes, *tasks, window).await?;
            let raw = point::cycles(Kind::Raw, &url, *processes, *tasks, window).await?;
            point.ours.push(ours.per_sec);
            point.raw.push(raw.per_sec);
            if processes * tasks > 1 {
                let window = bench.settings.contend_window * 2 / 3;
                point
                    .contended
                    .push(point::contend(Kind::Redlatch, &url, *processes, *tasks, window).await?);
            }
        }
    }
    let mut section = Section::new(
        "6. Cost as work grows (redlatch)",
        format!(
            "Uncontended: every task loops acquire → release on its own key for {:.1} s, beside \
             the raw recipe at the same shape. Contended: the same tasks all on one key for \
             {:.1} s. Client processes each have one client and 16 tasks; one task alone has \
             nobody to hand off to (–).",
            (bench.settings.window / 2).as_secs_f64(),
            (bench.settings.contend_window * 2 / 3).as_secs_f64()
        ),
    );
    let mut table = Table::new(&[
        "processes × tasks",
        "redlatch cycles/s",
        "raw cycles/s",
        "redlatch ÷ raw",
        "contended acquisitions/s",
        "hand-off p50 / p99 (µs), from release returning",
        "hand-off p50 / p99 (µs), from the release call",
        "longest wait (ms)",
        "per waiter max/min",
    ]);
    for ((processes, tasks), point) in POINTS.iter().zip(&points) {
        let contended = |f: fn(&HandoffStats) -> f64, decimals: usize| {
            if point.contended.is_empty() {
                return "–".to_owned();
            }
            contention::show(
                Summary::of(point.contended.iter().map(f)),
                &point.contended,
                f,
                decimals,
            )
        };
        table.row(vec![
            format!("{processes} × {tasks}"),
            Summary::of(point.ours.iter().copied()).show(0),
            Summary::of(point.raw.iter().copied()).show(0),
            ratio(&point.ours, &point.raw).show(2),
            contended(|s| s.acquisitions_per_sec, 0),
            format!(
                "{} / {}",
                contended(|s| s.handoff_p50_us, 0),
                contended(|s| s.handoff_p99_us, 0)
            ),
            format!(
                "{} / {}",
                contended(|s| s.from_call_p50_us, 0),
                contended(|s| s.from_call_p99_us, 0)
            ),
            contended(|s| s.longest_wait_ms, 1),
            contended(|s| s.per_waiter_ratio, 2),
        ]);
    }
    section.tables.push(table);
    Ok(section)
}

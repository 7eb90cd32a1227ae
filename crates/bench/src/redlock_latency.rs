//! Measure 4: acquire+release latency on 5 independent masters (Redlock)
//! against 1 master, one task, redlatch beside rslock and redlock.

use testkit::Servers;

use crate::clock::{now_ns, ns};
use crate::contender::{Kind, Locker};
use crate::harness::Bench;
use crate::report::{Section, Table};
use crate::stats::{Summary, nanos_histogram, quantile_us};

const MASTERS: usize = 5;
/// Goal: 5 masters cost at most this many times 1 master.
const GOAL_FACTOR: f64 = 1.5;

/// p50 and p99 (µs) of one window of sequential cycles.
struct Latency {
    p50: f64,
    p99: f64,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let servers = Servers::start(MASTERS).map_err(|error| format!("start 5 masters: {error}"))?;
    let five = servers.urls();
    let one = vec![five[0].clone()];
    let window = bench.settings.window / 2;
    let kinds = [Kind::Redlatch, Kind::Rslock, Kind::Redlock];
    // results[kind] = (1 master runs, 5 masters runs)
    let mut results: Vec<(Kind, Vec<Latency>, Vec<Latency>)> =
        kinds.iter().map(|k| (*k, Vec::new(), Vec::new())).collect();
    for run in 0..bench.settings.runs {
        for (kind, single, quorum) in &mut results {
            eprintln!("  run {} {}", run + 1, kind.label());
            single.push(latency(*kind, &one, window).await?);
            if let Some(latency) = latency_if_supported(*kind, &five, window).await? {
                quorum.push(latency);
            }
        }
    }
    let mut section = Section::new(
        "4. Redlock: 5 masters against 1 master, acquire+release latency",
        format!(
            "One task loops acquire → release on one key for {:.1} s; latency of the whole \
             cycle. 1 master: each library on one server (redlatch: its default lock on one \
             `Client`); 5 masters: each library's Redlock over 5 independent servers (quorum 3; \
             redlatch: `redlatch::Redlock`, which also renews and fences).",
            window.as_secs_f64()
        ),
    );
    let mut table = Table::new(&[
        "library",
        "1 master p50 (µs)",
        "1 master p99 (µs)",
        "5 masters p50 (µs)",
        "5 masters p99 (µs)",
        "5 ÷ 1 p50",
        "5 ÷ 1 p99",
    ]);
    for (kind, single, quorum) in &results {
        let p = |runs: &[Latency], f: fn(&Latency) -> f64| Summary::of(runs.iter().map(f));
        let ratio = |f: fn(&Latency) -> f64| {
            Summary::of(single.iter().zip(quorum).map(|(a, b)| f(b) / f(a)))
        };
        table.row(vec![
            kind.label().to_owned(),
            p(single, |l| l.p50).show(0),
            p(single, |l| l.p99).show(0),
            p(quorum, |l| l.p50).show(0),
            p(quorum, |l| l.p99).show(0),
            ratio(|l| l.p50).show(2),
            ratio(|l| l.p99).show(2),
        ]);
        if *kind == Kind::Redlatch && quorum.is_empty() {
            section.notes.push(
                "redlatch's Redlock is not in this build: its 5-master row is n/a.".to_owned(),
            );
        } else if *kind == Kind::Redlatch {
            let factor = ratio(|l| l.p50).median;
            let verdict = if factor <= GOAL_FACTOR {
                "met"
            } else {
                "not met"
            };
            section.notes.push(format!(
                "Goal 5 masters ≤ {GOAL_FACTOR}× 1 master (p50): {verdict} ({factor:.2}×)."
            ));
        }
    }
    section.tables.push(table);
    Ok(section)
}

/// `None` where a library has no multi-master lock in this build.
async fn latency_if_supported(
    kind: Kind,
    urls: &[String],
    window: std::time::Duration,
) -> Result<Option<Latency>, String> {
    match kind {
        Kind::Raw | Kind::Fair | Kind::Token | Kind::Pings => Ok(None),
        _ => latency(kind, urls, window).await.map(Some),
    }
}

async fn latency(
    kind: Kind,
    urls: &[String],
    window: std::time::Duration,
) -> Result<Latency, String> {
    let locker = Locker::connect(kind, urls).await?;
    let key = format!("bench:latency:{}", now_ns());
    let mut histogram = nanos_histogram();
    // The first cycle opens connections; it is not counted.
    let mut first = true;
    let deadline = now_ns() + ns(window);
    while now_ns() < deadline {
        let started = now_ns();
        let held = locker
            .acquire(&key, started + ns(std::time::Duration::from_secs(5)))
            .await?
            .ok_or_else(|| format!("{}: uncontended acquire timed out", kind.label()))?;
        locker.release(held).await?;
        if !first {
            histogram.saturating_record((now_ns() - started).max(1));
        }
        first = false;
    }
    Ok(Latency {
        p50: quantile_us(&histogram, 0.50),
        p99: quantile_us(&histogram, 0.99),
    })
}

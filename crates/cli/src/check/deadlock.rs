//! `redlatch check --deadlock`: two workers lock two names in opposite
//! orders (worker 1 takes `a` then `b`, worker 2 `b` then `a`), each
//! holding its first lock while it waits for the second: a wait-for cycle.
//! The scenario measures how long the cycle lasts, from the moment both
//! hold their first lock and ask for the second, under each way of locking:
//!
//! - redlatch's lock with deadlock detection (the default): one worker is
//!   refused with `Error::Deadlock` at its first check, in milliseconds;
//!   the other proceeds once the refused one lets go;
//! - redlatch's lock without detection, waiting `--duration` at most: the
//!   cycle lasts until both waits run out, and neither gets its second lock;
//! - the seeds' `SET NX PX` with the lab's fixed `--lease`: the cycle ends
//!   when a lease runs out under a holder that still works (mutual
//!   exclusion lost, not a deadlock resolved);
//! - redlatch's lock without detection and without a wait limit: the
//!   watchdog renews both holds, and the cycle never ends (stopped after
//!   `--duration`).
//!
//! Each worker has a client of its own, as two processes would; one
//! redis-server of its own serves the scenario.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::Client;
use serde::Serialize;
use tokio::sync::Barrier;

use super::args::CheckArgs;
use super::judge::millis;
use super::recipes::commands::{connect, set_nx_px};
use crate::exit::{self, Failure};

/// How one way of locking ended the cycle.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The way of locking.
    pub recipe: String,
    /// How long the cycle lasted, milliseconds; `null` when it never ended
    /// (the scenario stopped it).
    pub ended_after_ms: Option<u64>,
    /// What ended it, or that nothing did.
    pub outcome: String,
}

/// The scenario's report, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct DeadlockReport {
    /// The seeds' fixed lease, milliseconds.
    pub lease_ms: u64,
    /// The wait limit and the time after which a cycle is stopped, milliseconds.
    pub duration_ms: u64,
    /// One row per way of locking.
    pub rows: Vec<Row>,
}

/// Runs the scenario and prints its report.
pub fn deadlock(json: bool, args: &CheckArgs) -> Result<u8, Failure> {
    let unavailable =
        |what: String| Failure::new(exit::UNAVAILABLE, format!("check --deadlock: {what}"));
    let server = testkit::RedisServer::start().map_err(|error| unavailable(error.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| unavailable(error.to_string()))?;
    let url = server.url();
    let rows = runtime
        .block_on(async {
            Ok::<_, String>(vec![
                library(&url, "detect", true, None, args.duration).await?,
                library(&url, "wait", false, Some(args.duration), args.duration).await?,
                seeds(&url, args.lease, args.duration).await?,
                library(&url, "watchdog", false, None, args.duration).await?,
            ])
        })
        .map_err(unavailable)?;
    let report = DeadlockReport {
        lease_ms: millis(args.lease),
        duration_ms: millis(args.duration),
        rows,
    };
    let text = if json {
        crate::output::json(&report)?
    } else {
        render(&report)
    };
    crate::output::emit(&text)?;
    Ok(0)
}

/// The report for people: one line per way of locking.
fn render(report: &DeadlockReport) -> String {
    let mut text = String::from(
        "deadlock: two workers lock a then b and b then a, each holding its first lock\n\n",
    );
    let width = report
        .rows
        .iter()
        .map(|row| row.recipe.len())
        .max()
        .unwrap_or(0);
    for row in &report.rows {
        let ended = match row.ended_after_ms {
            Some(ms) if ms < 10_000 => format!("{ms} ms"),
            Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
            None => "never".to_owned(),
        };
        let _ = writeln!(
            text,
            "  {:<width$}  {ended:>8}  {}",
            row.recipe, row.outcome
        );
    }
    text.trim_end().to_owned()
}

/// What one worker's second acquire came to, and when.
struct Second {
    after: Duration,
    outcome: Result<bool, redlatch::Error>,
}

/// Two workers on redlatch's lock, each with its own client; `wait` bounds
/// the second acquire (`None`: until held, stopped after `stop`).
async fn library(
    url: &str,
    name: &str,
    detection: bool,
    wait: Option<Duration>,
    stop: Duration,
) -> Result<Row, String> {
    let (a, b) = (
        format!("lab:deadlock:{name}:a"),
        format!("lab:deadlock:{name}:b"),
    );
    let barrier = Arc::new(Barrier::new(2));
    let mut workers = Vec::new();
    for (first, second) in [(a.clone(), b.clone()), (b, a)] {
        let client = Client::builder(url)
            .deadlock_detection(detection)
            .connect()
            .await
            .map_err(|error| error.to_string())?;
        let barrier = barrier.clone();
        workers.push(tokio::spawn(async move {
            let held = client.lock(first).acquire().await?;
            barrier.wait().await;
            let started = Instant::now();
            let second = client.lock(second).acquire_within(wait).await;
            let after = started.elapsed();
            // The refused or timed-out worker lets go of its first lock.
            let outcome = match second {
                Ok(guard) => {
                    let _ = guard.release().await;
                    Ok(true)
                }
                Err(redlatch::Error::Timeout { .. }) => Ok(false),
                Err(error) => Err(error),
            };
            let _ = held.release().await;
            Ok::<_, redlatch::Error>(Second { after, outcome })
        }));
    }
    let recipe = match (detection, wait) {
        (true, _) => "redlatch (deadlock detection)".to_owned(),
        (false, Some(wait)) => format!(
            "redlatch, no detection, wait {}",
            humantime::format_duration(wait)
        ),
        (false, None) => "redlatch, no detection, watchdog, no wait limit".to_owned(),
    };
    let joined = tokio::time::timeout(stop + Duration::from_secs(1), async {
        let mut seconds = Vec::new();
        for worker in &mut workers {
            seconds.push(worker.await);
        }
        seconds
    })
    .await;
    let Ok(joined) = joined else {
        for worker in &workers {
            worker.abort();
        }
        return Ok(Row {
            recipe,
            ended_after_ms: None,
            outcome: format!(
                "stopped after {}: both still waiting, their holds renewed",
                humantime::format_duration(stop)
            ),
        });
    };
    let seconds: Vec<Second> = joined
        .into_iter()
        .map(|joined| match joined {
            Ok(Ok(second)) => Ok(second),
            Ok(Err(error)) => Err(error.to_string()),
            Err(error) => Err(error.to_string()),
        })
        .collect::<Result<_, _>>()?;
    let first = seconds
        .iter()
        .min_by_key(|second| second.after)
        .ok_or("no worker")?;
    let refused = seconds
        .iter()
        .filter(|second| matches!(second.outcome, Err(redlatch::Error::Deadlock { .. })))
        .count();
    let proceeded = seconds
        .iter()
        .filter(|second| matches!(second.outcome, Ok(true)))
        .count();
    let outcome = match (refused, proceeded) {
        (1, 1) => "one worker refused (Error::Deadlock), the other proceeded".to_owned(),
        (0, 0) => "both waits ran out; neither worker got its second lock".to_owned(),
        (refused, proceeded) => format!("{refused} refused, {proceeded} proceeded"),
    };
    Ok(Row {
        recipe,
        ended_after_ms: Some(millis(first.after)),
        outcome,
    })
}

/// Two workers on the seeds' `SET NX PX` with a fixed `lease`, polling
/// every 2 ms as the lab's recipes do: the cycle lasts until a lease runs
/// out under its holder, who never gave it back.
async fn seeds(url: &str, lease: Duration, stop: Duration) -> Result<Row, String> {
    let (a, b) = ("lab:deadlock:seeds:a", "lab:deadlock:seeds:b");
    let lease_ms = millis(lease);
    let barrier = Arc::new(Barrier::new(2));
    let mut workers = Vec::new();
    for (first, second) in [(a, b), (b, a)] {
        let mut conn = connect(url, Duration::from_secs(2)).await?;
        let barrier = barrier.clone();
        workers.push(tokio::spawn(async move {
            while set_nx_px(&mut conn, first, lease_ms).await?.is_none() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            barrier.wait().await;
            let started = Instant::now();
            while set_nx_px(&mut conn, second, lease_ms).await?.is_none() {
                if started.elapsed() > stop {
                    return Ok(None);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok::<_, String>(Some(started.elapsed()))
        }));
    }
    let mut ended = Vec::new();
    for worker in workers {
        ended.push(worker.await.map_err(|error| error.to_string())??);
    }
    let first = ended.iter().flatten().min().copied();
    Ok(Row {
        recipe: format!("set-nx-px, lease {}", humantime::format_duration(lease)),
        ended_after_ms: first.map(millis),
        outcome: "a lease ran out under a worker still holding it: the other got that \
                  lock while it worked (mutual exclusion lost, not a deadlock found)"
            .to_owned(),
    })
}

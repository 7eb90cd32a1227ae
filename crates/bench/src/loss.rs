//! Measure 7: how long a held lock takes to learn that it was lost, per
//! cause, with the loss watch (client-side caching) and without it (the
//! renewals alone).

use std::time::{Duration, Instant};

use redlatch::Client;

use crate::harness::Bench;
use crate::report::{Section, Table};
use crate::stats::{nanos_histogram, quantile_us};

/// A short lease, so that the renewals (every lease/3) answer within the run.
const LEASE: Duration = Duration::from_secs(3);
/// Past the watch's settling time (10 ms): the key is watched.
const HELD_FOR: Duration = Duration::from_millis(30);
/// How far ahead the expiry cause sets the key's end.
const EXPIRES_IN: Duration = Duration::from_millis(20);

#[derive(Clone, Copy)]
enum Cause {
    Delete,
    ForceUnlock,
    Flush,
    Expiry,
}

impl Cause {
    fn label(self) -> &'static str {
        match self {
            Cause::Delete => "DEL of the key",
            Cause::ForceUnlock => "force-unlock by another client",
            Cause::Flush => "FLUSHALL",
            Cause::Expiry => "expiry (from the key's end)",
        }
    }
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let url = bench.url();
    let trials = if bench.settings.quick { 5 } else { 40 };
    let causes = [
        Cause::Delete,
        Cause::ForceUnlock,
        Cause::Flush,
        Cause::Expiry,
    ];
    let mut table = Table::new(&[
        "cause",
        "watch p50 (ms)",
        "watch p99 (ms)",
        "renewals only p50 (ms)",
        "renewals only p99 (ms)",
    ]);
    for cause in causes {
        let mut cells = vec![cause.label().to_owned()];
        for watch in [true, false] {
            eprintln!("  {} watch {watch}", cause.label());
            let mut times = nanos_histogram();
            for trial in 0..trials {
                let took = noticed_after(bench, &url, cause, watch, trial).await?;
                times
                    .record(took.as_nanos().max(1) as u64)
                    .map_err(|error| error.to_string())?;
            }
            for quantile in [0.5, 0.99] {
                cells.push(format!("{:.1}", quantile_us(&times, quantile) / 1e3));
            }
        }
        table.row(cells);
    }
    let mut section = Section::new(
        "7. Loss known: from the cause to `Guard::lost()`",
        format!(
            "One client holds a lock for {} ms (past the watch's 10 ms settling), then the \
             cause happens and the time until the guard's `lost()` resolves is measured, \
             {trials} times per cause and mode. With the watch (the default): one connection per \
             client reads each settled hold and is told by the server (RESP3 `CLIENT TRACKING`) \
             when its key changes. Renewals only (`watch_holds(false)`, and every cluster): \
             the next renewal finds it, lease/3 after the acquisition; the lease here is {} s, \
             so about 1 s less the 30 ms held. With the default 30 s lease a loss waits up to \
             10 s. Expiry is timed from the key's end ({} ms after the PEXPIRE): Redis \
             deletes an expired key (and tells the watch) in its expiry cycle, 10 times a \
             second by default.",
            HELD_FOR.as_millis(),
            LEASE.as_secs(),
            EXPIRES_IN.as_millis()
        ),
    );
    section.tables.push(table);
    Ok(section)
}

/// One trial: hold, cause the loss, time until the guard knows.
async fn noticed_after(
    bench: &Bench,
    url: &str,
    cause: Cause,
    watch: bool,
    trial: usize,
) -> Result<Duration, String> {
    let client = Client::builder(url)
        .default_lease(LEASE)
        .watch_holds(watch)
        .connect()
        .await
        .map_err(|error| format!("connect: {error}"))?;
    let name = format!("loss:{trial}");
    let guard = client
        .lock(&name)
        .acquire()
        .await
        .map_err(|error| format!("acquire: {error}"))?;
    tokio::time::sleep(HELD_FOR).await;
    let lost = guard.lost();
    let mut admin = crate::contender::admin_connection(&bench.server).await?;
    let started = Instant::now();
    let from = match cause {
        Cause::Delete => {
            let _: i64 = redis::cmd("DEL")
                .arg(&name)
                .query_async(&mut admin)
                .await
                .map_err(|error| error.to_string())?;
            started
        }
        Cause::ForceUnlock => {
            let other = Client::connect(url)
                .await
                .map_err(|error| format!("connect: {error}"))?;
            let started = Instant::now();
            other
                .lock(&name)
                .force_unlock()
                .await
                .map_err(|error| format!("force unlock: {error}"))?;
            started
        }
        Cause::Flush => {
            let () = redis::cmd("FLUSHALL")
                .query_async(&mut admin)
                .await
                .map_err(|error| error.to_string())?;
            started
        }
        Cause::Expiry => {
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(&name)
                .arg(EXPIRES_IN.as_millis() as u64)
                .query_async(&mut admin)
                .await
                .map_err(|error| error.to_string())?;
            started + EXPIRES_IN
        }
    };
    tokio::time::timeout(LEASE * 2, lost)
        .await
        .map_err(|_| format!("{}: the loss went unnoticed", cause.label()))?;
    Ok(Instant::now().saturating_duration_since(from))
}

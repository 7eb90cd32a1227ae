//! Measure 8: what `CLIENT NO-EVICT` costs and saves. A client holds locks
//! with a short lease while the server is short of client memory
//! (`maxmemory-clients`) and closes every client it may; with the flag
//! (the default) and without it (`no_evict(false)`).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlatch::Client;

use crate::harness::Bench;
use crate::report::{Section, Table};

/// Renewed every 200 ms: about 25 renewal rounds in the full run.
const LEASE: Duration = Duration::from_millis(600);
const HELD: usize = 100;
/// Far below what any client uses: every evictable client is closed.
const CLIENT_MEMORY_LIMIT: &str = "1kb";

/// What one run under pressure gave.
struct Outcome {
    lost: usize,
    renewal_round_trips: u64,
    evicted: u64,
    no_evict_calls: u64,
    seconds: f64,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let window = if bench.settings.quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    };
    let mut table = Table::new(&[
        "client",
        "holds lost",
        "renewal round trips",
        "clients evicted",
        "CLIENT NO-EVICT calls/s",
    ]);
    for no_evict in [true, false] {
        eprintln!("  no_evict {no_evict}");
        let outcome = under_pressure(bench, no_evict, window).await?;
        table.row(vec![
            if no_evict {
                "default (NO-EVICT)".to_owned()
            } else {
                "`no_evict(false)`".to_owned()
            },
            format!("{} of {HELD}", outcome.lost),
            outcome.renewal_round_trips.to_string(),
            outcome.evicted.to_string(),
            format!(
                "{:.1}",
                outcome.no_evict_calls as f64 / outcome.seconds.max(1e-9)
            ),
        ]);
    }
    let mut section = Section::new(
        "8. Client eviction: what `CLIENT NO-EVICT` costs and saves",
        format!(
            "One client holds {HELD} locks with a {} ms lease (renewed every {} ms, in one \
             batched call per round) for {} s while the server runs with `maxmemory-clients \
             {CLIENT_MEMORY_LIMIT}`, so that it closes every client it may, and a second client \
             keeps taking and giving back a lock beside it. With the default `no_evict(true)` \
             the client's command connection (the renewals) and loss-watch connection are \
             kept; with `no_evict(false)` they are closed like any other. A hold is lost when \
             its guard says so. The cost is the calls: one at connect and, while holds are \
             renewed, at most one a second (from `INFO commandstats`).",
            LEASE.as_millis(),
            LEASE.as_millis() / 3,
            window.as_secs()
        ),
    );
    section.tables.push(table);
    Ok(section)
}

async fn under_pressure(
    bench: &Bench,
    no_evict: bool,
    window: Duration,
) -> Result<Outcome, String> {
    let url = bench.url();
    let mut admin = crate::contender::admin_connection(&bench.server).await?;
    let () = redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("ON")
        .query_async(&mut admin)
        .await
        .map_err(|error| format!("CLIENT NO-EVICT: {error}"))?;
    let client = Client::builder(&url)
        .default_lease(LEASE)
        .no_evict(no_evict)
        .connect()
        .await
        .map_err(|error| format!("connect: {error}"))?;
    let other = Client::builder(&url)
        .no_evict(false)
        .connect()
        .await
        .map_err(|error| format!("connect: {error}"))?;
    let mut guards = Vec::with_capacity(HELD);
    for n in 0..HELD {
        guards.push(
            client
                .lock(format!("evict:{n}"))
                .acquire()
                .await
                .map_err(|error| format!("acquire: {error}"))?,
        );
    }
    let evicted_before = stat(&mut admin, "stats", "evicted_clients").await?;
    let calls_before = stat(&mut admin, "commandstats", "cmdstat_client|no-evict").await?;
    let rounds_before = client.renewal_round_trips();
    set_limit(&mut admin, CLIENT_MEMORY_LIMIT).await?;
    let started = Instant::now();
    while started.elapsed() < window {
        // Errors are the point here: the other client is being evicted.
        if let Ok(Some(guard)) = other.lock("evict:other").try_acquire().await {
            let _ = guard.release().await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    set_limit(&mut admin, "0").await?;
    let outcome = Outcome {
        lost: guards.iter().filter(|guard| !guard.is_held()).count(),
        renewal_round_trips: client.renewal_round_trips() - rounds_before,
        evicted: stat(&mut admin, "stats", "evicted_clients").await? - evicted_before,
        no_evict_calls: stat(&mut admin, "commandstats", "cmdstat_client|no-evict").await?
            - calls_before,
        seconds,
    };
    for guard in guards {
        let _ = guard.release().await;
    }
    Ok(outcome)
}

async fn set_limit(admin: &mut MultiplexedConnection, limit: &str) -> Result<(), String> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-clients")
        .arg(limit)
        .query_async(admin)
        .await
        .map_err(|error| format!("CONFIG SET maxmemory-clients: {error}"))
}

/// One number from `INFO section`: a plain field (`evicted_clients:3`) or
/// the `calls=` of a command's line (`cmdstat_client|no-evict:calls=2,...`).
async fn stat(
    admin: &mut MultiplexedConnection,
    section: &str,
    field: &str,
) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(admin)
        .await
        .map_err(|error| format!("INFO {section}: {error}"))?;
    Ok(info
        .lines()
        .find_map(|line| line.trim().strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.strip_prefix("calls=").unwrap_or(value))
        .and_then(|value| value.split(',').next()?.parse().ok())
        .unwrap_or(0))
}

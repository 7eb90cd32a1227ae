//! Measure 5: 10,000 locks held at once by one client: watchdog round trips
//! per renewal period, client memory per held lock and per waiter, Redis
//! memory per held lock.

use std::time::Duration;

use futures_util::{StreamExt, stream};
use redis::aio::MultiplexedConnection;

use crate::Bench;
use crate::alloc::live_bytes;
use crate::contender::LEASE;
use crate::redis_info::used_memory;
use crate::report::{Section, Table};
use crate::stats::{Summary, group};

const HELD: usize = 10_000;
const WAITERS: usize = 1_000;
/// Acquisitions in flight while filling up.
const IN_FLIGHT: usize = 64;
/// A short lease so that renewal periods (lease/3) fit in the window.
const SCALE_LEASE: Duration = Duration::from_secs(3);
/// Time for the waiters to make their first attempt and park.
const PARK_TIME: Duration = Duration::from_millis(500);
/// How long after the last acquire memory is read: past the loss watch's
/// and the holder record's settling (10 and 50 ms), within the lease.
const SETTLED: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Figures {
    client_per_lock: Vec<f64>,
    redis_per_lock: Vec<f64>,
    round_trips_per_period: Vec<f64>,
    client_per_waiter: Vec<f64>,
    fill_seconds: Vec<f64>,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let url = bench.url();
    let mut conn = crate::contender::admin_connection(&bench.server).await?;
    let periods: u32 = if bench.settings.quick { 1 } else { 3 };
    let (mut ours, mut unnamed, mut theirs) =
        (Figures::default(), Figures::default(), Figures::default());
    for run in 0..bench.settings.runs {
        eprintln!("  run {} redlatch", run + 1);
        redlatch_run(&url, &mut conn, periods, true, &mut ours).await?;
        eprintln!("  run {} redlatch, holder_identity(false)", run + 1);
        redlatch_run(&url, &mut conn, periods, false, &mut unnamed).await?;
        eprintln!("  run {} rslock", run + 1);
        rslock_run(&url, &mut conn, &mut theirs).await?;
    }
    let mut section = Section::new(
        "5. Scale: 10,000 locks held at once by one client",
        format!(
            "One client acquires 10,000 distinct locks ({IN_FLIGHT} in flight) and holds them. \
             redlatch runs with a {} s lease, so its watchdog renews every {} ms; round trips \
             are counted by `Client::renewal_round_trips()` over {periods} renewal periods. \
             Client memory: live heap bytes (a counting global allocator) before and {} s \
             after the last acquire (the holds settled: watched, and named in the holder \
             record), divided by the count. Redis memory: `used_memory` of INFO memory at the \
             same two moments. Waiters: {WAITERS} tasks waiting on one held lock. The middle \
             column is the same client with `holder_identity(false)`: what naming the holders \
             costs.",
            SCALE_LEASE.as_secs(),
            SCALE_LEASE.as_millis() / 3,
            SETTLED.as_secs_f64()
        ),
    );
    let mut table = Table::new(&[
        "figure",
        "redlatch",
        "redlatch, holders not named",
        "rslock 0.10",
    ]);
    let cell = |values: &[f64], decimals: usize| Summary::of(values.iter().copied()).show(decimals);
    table.row(vec![
        "client heap per held lock (bytes)".into(),
        cell(&ours.client_per_lock, 0),
        cell(&unnamed.client_per_lock, 0),
        cell(&theirs.client_per_lock, 0),
    ]);
    table.row(vec![
        "Redis used_memory per held lock (bytes)".into(),
        cell(&ours.redis_per_lock, 0),
        cell(&unnamed.redis_per_lock, 0),
        cell(&theirs.redis_per_lock, 0),
    ]);
    table.row(vec![
        "renewal round trips per renewal period, 10,000 locks".into(),
        cell(&ours.round_trips_per_period, 1),
        cell(&unnamed.round_trips_per_period, 1),
        "no watchdog: one `extend` call per lock".into(),
    ]);
    table.row(vec![
        "client heap per waiter (bytes, the waiting task included)".into(),
        cell(&ours.client_per_waiter, 0),
        cell(&unnamed.client_per_waiter, 0),
        "not measured (polls in its own loop)".into(),
    ]);
    table.row(vec![
        "time to acquire 10,000 locks (s)".into(),
        cell(&ours.fill_seconds, 2),
        cell(&unnamed.fill_seconds, 2),
        cell(&theirs.fill_seconds, 2),
    ]);
    section.tables.push(table);
    let per_period = Summary::of(ours.round_trips_per_period.iter().copied()).median;
    section.notes.push(format!(
        "Goal about one renewal round trip per 100 locks ({} per period for 10,000): {} per period, {} locks per round trip.",
        HELD / 100,
        group(per_period, 1),
        group(HELD as f64 / per_period, 0)
    ));
    section.notes.push(
        "redlatch's Redis figure includes the fencing counter `redisson_lock_token:{NAME}`, \
         which stays after release (one small string per lock name ever used)."
            .to_owned(),
    );
    Ok(section)
}

async fn redlatch_run(
    url: &str,
    conn: &mut MultiplexedConnection,
    periods: u32,
    named: bool,
    figures: &mut Figures,
) -> Result<(), String> {
    let client = redlatch::Client::builder(url)
        .default_lease(SCALE_LEASE)
        .holder_identity(named)
        .connect()
        .await
        .map_err(|error| format!("redlatch connect: {error}"))?;
    flush(conn).await?;
    let redis_before = used_memory(conn).await?;
    let heap_before = live_bytes();
    let started = std::time::Instant::now();
    let guards: Vec<redlatch::Guard> = stream::iter(0..HELD)
        .map(|i| {
            let lock = client.lock(format!("bench:scale:{i}"));
            async move { lock.acquire().await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|error| format!("redlatch acquire: {error}"))?;
    figures.fill_seconds.push(started.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLED).await;
    figures
        .client_per_lock
        .push((live_bytes() - heap_before) as f64 / HELD as f64);
    figures
        .redis_per_lock
        .push((used_memory(conn).await? - redis_before) as f64 / HELD as f64);

    let renewals_before = client.renewal_round_trips();
    tokio::time::sleep(SCALE_LEASE / 3 * periods).await;
    let renewals = client.renewal_round_trips() - renewals_before;
    figures
        .round_trips_per_period
        .push(renewals as f64 / f64::from(periods));
    if let Some(lost) = guards.iter().position(|guard| !guard.is_held()) {
        return Err(format!("redlatch lost lock {lost} while holding 10,000"));
    }

    let hot = client
        .lock("bench:scale:hot")
        .acquire()
        .await
        .map_err(|error| format!("redlatch acquire: {error}"))?;
    let heap_before = live_bytes();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let lock = client.lock("bench:scale:hot");
            tokio::spawn(async move { lock.acquire().await.map(drop) })
        })
        .collect();
    tokio::time::sleep(PARK_TIME).await;
    figures
        .client_per_waiter
        .push((live_bytes() - heap_before) as f64 / WAITERS as f64);
    for waiter in &waiters {
        waiter.abort();
    }
    drop(waiters);
    hot.release()
        .await
        .map_err(|error| format!("redlatch release: {error}"))?;
    let released: Vec<_> = stream::iter(guards)
        .map(|guard| guard.release())
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    if let Some(Err(error)) = released.into_iter().find(Result::is_err) {
        return Err(format!("redlatch release: {error}"));
    }
    Ok(())
}

async fn rslock_run(
    url: &str,
    conn: &mut MultiplexedConnection,
    figures: &mut Figures,
) -> Result<(), String> {
    let manager = rslock::LockManager::new(vec![url.to_owned()]);
    // Open the connection before measuring.
    let warm = manager
        .lock("bench:scale:warm", LEASE)
        .await
        .map_err(|error| format!("rslock lock: {error}"))?;
    manager.unlock(&warm).await;
    drop(warm);
    flush(conn).await?;
    let redis_before = used_memory(conn).await?;
    let heap_before = live_bytes();
    let started = std::time::Instant::now();
    let locks: Vec<rslock::Lock> = stream::iter(0..HELD)
        .map(|i| {
            let manager = manager.clone();
            async move {
                manager
                    .lock(format!("bench:scale:{i}").as_str(), LEASE)
                    .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|error| format!("rslock lock: {error}"))?;
    figures.fill_seconds.push(started.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLED).await;
    figures
        .client_per_lock
        .push((live_bytes() - heap_before) as f64 / HELD as f64);
    figures
        .redis_per_lock
        .push((used_memory(conn).await? - redis_before) as f64 / HELD as f64);
    stream::iter(locks)
        .for_each_concurrent(IN_FLIGHT, |lock| {
            let manager = manager.clone();
            async move { manager.unlock(&lock).await }
        })
        .await;
    Ok(())
}

async fn flush(conn: &mut MultiplexedConnection) -> Result<(), String> {
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async::<()>(conn)
        .await
        .map_err(|error| format!("FLUSHALL: {error}"))
}

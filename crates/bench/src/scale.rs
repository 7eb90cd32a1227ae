//! Measure 5: 10,000 locks held at once by one client: watchdog round trips
//! per renewal period, client memory per held lock and per waiter, Redis
//! memory per held lock.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use redis::aio::MultiplexedConnection;

use crate::alloc::{live_blocks, live_bytes};
use crate::contender::LEASE;
use crate::harness::Bench;
use crate::redis_info::used_memory;
use crate::report::{Section, Table};
use crate::stats::{Summary, group};

const HELD: usize = 10_000;
/// Waiters parked on one held lock, to read the heap per waiter.
const WAITERS: [usize; 2] = [1_000, 10_000];
/// Goal: client heap per parked waiter.
const GOAL_WAITER_BYTES: f64 = 1024.0;
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
    /// Parked-waiter figures per waiter count, one per run.
    waiters: BTreeMap<usize, Vec<WaiterFigures>>,
    fill_seconds: Vec<f64>,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let url = bench.url();
    let mut conn = crate::contender::admin_connection(&bench.server).await?;
    let periods: u32 = if bench.settings.quick { 1 } else { 3 };
    let waiter_counts: &[usize] = if bench.settings.quick {
        &WAITERS[..1]
    } else {
        &WAITERS
    };
    let (mut ours, mut unnamed, mut theirs) =
        (Figures::default(), Figures::default(), Figures::default());
    for run in 0..bench.settings.runs {
        eprintln!("  run {} redlatch", run + 1);
        redlatch_run(&url, &mut conn, periods, true, waiter_counts, &mut ours).await?;
        eprintln!("  run {} redlatch, holder_identity(false)", run + 1);
        redlatch_run(&url, &mut conn, periods, false, waiter_counts, &mut unnamed).await?;
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
             record), divided by the count. Each kind collects its guards (rslock: its `Lock`s) into one \
             vector of exactly 10,000 made after the first reading, so a guard's own size \
             counts and no growth slack or `Result` slot of the harness does. Redis memory: `used_memory` of INFO memory at the \
             same two moments. The middle column is the same client with \
             `holder_identity(false)`: what naming the holders costs. Parked waiters: after \
             the holds are released, a fresh client (default lease: no renewal during the \
             reading) holds one lock, settled; live heap bytes and live allocations are read \
             once they stop moving (two readings 100 ms apart within 1 KiB), then N bare tasks \
             parked on `pending()` are spawned and read the same way (the baseline: what the \
             runtime keeps per task) and ended, then N tasks waiting on the held lock, read \
             {} ms after spawning and once settled; every waiter is checked still waiting.",
            SCALE_LEASE.as_secs(),
            SCALE_LEASE.as_millis() / 3,
            SETTLED.as_secs_f64(),
            PARK_TIME.as_millis()
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
    let not_measured = || "not measured (polls in its own loop)".to_owned();
    for &count in waiter_counts {
        let waiter_cell = |figures: &Figures, f: fn(&WaiterFigures) -> f64, decimals: usize| {
            let values: Vec<f64> = figures
                .waiters
                .get(&count)
                .map(|runs| runs.iter().map(f).collect())
                .unwrap_or_default();
            cell(&values, decimals)
        };
        let rows: [WaiterRow; 4] = [
            (
                format!(
                    "client heap per parked waiter, {} waiters (bytes, its task and future included)",
                    group(count as f64, 0)
                ),
                |w| w.bytes,
                0,
            ),
            (
                format!(
                    "  of which a bare task parked on `pending()`, {} tasks (bytes)",
                    group(count as f64, 0)
                ),
                |w| w.bare_task_bytes,
                0,
            ),
            (
                format!(
                    "  the waiter less the bare task, {} waiters (bytes)",
                    group(count as f64, 0)
                ),
                |w| w.bytes - w.bare_task_bytes,
                0,
            ),
            (
                format!(
                    "live allocations per parked waiter, {} waiters (bare task: {})",
                    group(count as f64, 0),
                    group(
                        ours.waiters
                            .get(&count)
                            .and_then(|r| r.first())
                            .map_or(f64::NAN, |w| w.bare_task_blocks),
                        1
                    )
                ),
                |w| w.blocks,
                1,
            ),
        ];
        for (label, f, decimals) in rows {
            table.row(vec![
                label,
                waiter_cell(&ours, f, decimals),
                waiter_cell(&unnamed, f, decimals),
                not_measured(),
            ]);
        }
    }
    let future_cell = |figures: &Figures| {
        let values: Vec<f64> = figures
            .waiters
            .values()
            .flatten()
            .map(|w| w.future_bytes)
            .collect();
        cell(&values, 0)
    };
    table.row(vec![
        "the waiting task's future, `size_of_val` (bytes, inside the task)".into(),
        future_cell(&ours),
        future_cell(&unnamed),
        not_measured(),
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
    if let Some(&largest) = waiter_counts.last() {
        let per_waiter = Summary::of(
            ours.waiters
                .get(&largest)
                .into_iter()
                .flatten()
                .map(|w| w.bytes),
        )
        .median;
        section.notes.push(format!(
            "Goal client heap per parked waiter ≤ 1 KB ({} waiters, task included): {} ({} bytes).",
            group(largest as f64, 0),
            if per_waiter <= GOAL_WAITER_BYTES {
                "met"
            } else {
                "not met"
            },
            group(per_waiter, 0)
        ));
    }
    section.notes.push(
        "redlatch's locks share one fencing counter per server (`redlatch_lock_token`), \
         so nothing stays after release (before issue 36: one counter per lock name ever used)."
            .to_owned(),
    );
    Ok(section)
}

async fn redlatch_run(
    url: &str,
    conn: &mut MultiplexedConnection,
    periods: u32,
    named: bool,
    waiter_counts: &[usize],
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
    let mut acquired = stream::iter(0..HELD)
        .map(|i| {
            let lock = client.lock(format!("bench:scale:{i}"));
            async move { lock.acquire().await }
        })
        .buffer_unordered(IN_FLIGHT);
    let mut guards: Vec<redlatch::Guard> = Vec::with_capacity(HELD);
    while let Some(guard) = acquired.next().await {
        guards.push(guard.map_err(|error| format!("redlatch acquire: {error}"))?);
    }
    drop(acquired);
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

    let released: Vec<_> = stream::iter(guards)
        .map(|guard| guard.release())
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    if let Some(Err(error)) = released.into_iter().find(Result::is_err) {
        return Err(format!("redlatch release: {error}"));
    }
    drop(client);
    for &count in waiter_counts {
        let waiters = waiter_heap(url, named, count).await?;
        figures.waiters.entry(count).or_default().push(waiters);
    }
    Ok(())
}

/// A waiter table row: label, how to read the figure, decimals shown.
type WaiterRow = (String, fn(&WaiterFigures) -> f64, usize);

/// What parked waiters cost the client, from one reading.
#[derive(Clone, Copy)]
struct WaiterFigures {
    /// Live heap bytes per parked waiter, its task and future included.
    bytes: f64,
    /// Live heap bytes per bare task parked on `pending()`: the baseline.
    bare_task_bytes: f64,
    /// Live allocations per parked waiter.
    blocks: f64,
    /// Live allocations per bare task.
    bare_task_blocks: f64,
    /// Size of the waiting task's future (the async block holding the
    /// `Lock` and its `acquire` future), allocated inside the task.
    future_bytes: f64,
}

/// Live heap and allocations once they have stopped moving: read every
/// 100 ms until two readings in a row differ by under 1 KiB (at most 3 s).
async fn settled_heap() -> (i64, i64) {
    let mut last = (live_bytes(), live_blocks());
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = (live_bytes(), live_blocks());
        if (now.0 - last.0).abs() < 1024 {
            return now;
        }
        last = now;
    }
    last
}

/// Client heap per parked waiter, measured apart from any other work: a
/// fresh client with the default lease (no renewal during the reading),
/// one held lock, settled (watched and named); then `count` bare tasks
/// parked on `pending()` (the baseline: what the runtime keeps per task),
/// read once settled, and ended; then `count` tasks waiting on the held
/// lock, read once parked and settled.
async fn waiter_heap(url: &str, named: bool, count: usize) -> Result<WaiterFigures, String> {
    const HOT: &str = "bench:scale:hot";
    let client = redlatch::Client::builder(url)
        .holder_identity(named)
        .connect()
        .await
        .map_err(|error| format!("redlatch connect: {error}"))?;
    let hot = client
        .lock(HOT)
        .acquire()
        .await
        .map_err(|error| format!("redlatch acquire: {error}"))?;
    let future_bytes = {
        let lock = client.lock(HOT);
        let waiting = async move { lock.acquire().await.map(drop) };
        std::mem::size_of_val(&waiting) as f64
    };
    // Room for the handles before the first reading: not counted.
    let mut handles: Vec<tokio::task::JoinHandle<()>> = Vec::with_capacity(count);
    let mut waiter_handles = Vec::with_capacity(count);

    let before = settled_heap().await;
    handles.extend((0..count).map(|_| tokio::spawn(std::future::pending::<()>())));
    let bare = settled_heap().await;
    for handle in &handles {
        handle.abort();
    }
    for handle in handles.drain(..) {
        let _ = handle.await;
    }

    let start = settled_heap().await;
    waiter_handles.extend((0..count).map(|_| {
        let lock = client.lock(HOT);
        tokio::spawn(async move { lock.acquire().await.map(drop) })
    }));
    tokio::time::sleep(PARK_TIME).await;
    let parked = settled_heap().await;
    if let Some(done) = waiter_handles.iter().position(|h| h.is_finished()) {
        return Err(format!("waiter {done} ended while the lock was held"));
    }
    for handle in &waiter_handles {
        handle.abort();
    }
    for handle in waiter_handles.drain(..) {
        let _ = handle.await;
    }
    hot.release()
        .await
        .map_err(|error| format!("redlatch release: {error}"))?;
    let n = count as f64;
    Ok(WaiterFigures {
        bytes: (parked.0 - start.0) as f64 / n,
        bare_task_bytes: (bare.0 - before.0) as f64 / n,
        blocks: (parked.1 - start.1) as f64 / n,
        bare_task_blocks: (bare.1 - before.1) as f64 / n,
        future_bytes,
    })
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
    let mut acquired = stream::iter(0..HELD)
        .map(|i| {
            let manager = manager.clone();
            async move {
                manager
                    .lock(format!("bench:scale:{i}").as_str(), LEASE)
                    .await
            }
        })
        .buffer_unordered(IN_FLIGHT);
    let mut locks: Vec<rslock::Lock> = Vec::with_capacity(HELD);
    while let Some(lock) = acquired.next().await {
        locks.push(lock.map_err(|error| format!("rslock lock: {error}"))?);
    }
    drop(acquired);
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

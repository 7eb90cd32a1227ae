//! Measure 9: many locks (100,000 by default, `--held N`) held by one
//! client and kept alive by its watchdog: renewal round trips per renewal
//! period, redis-server's and the client's CPU share while only renewals
//! run, client heap and Redis memory per held lock, time to acquire them;
//! beside Redisson's published design of up to 100 locks renewed per call.

use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use redis::aio::MultiplexedConnection;

use crate::alloc::{live_blocks, live_bytes};
use crate::harness::Bench;
use crate::redis_info::{self, CommandStat, own_cpu, used_cpu, used_memory};
use crate::report::{Section, Table};
use crate::stats::{Summary, group};

/// Tasks that acquire (and release) the locks, each with [`IN_FLIGHT_EACH`]
/// calls under way: the client coalesces calls under way at the same moment.
const FILL_TASKS: usize = 16;
const IN_FLIGHT_EACH: usize = 64;
/// How long after the last acquire the periods start and memory is read:
/// the holds watched (10 ms in) and named (50 ms in), the fill's buffers
/// given back; well within the lease, which the watchdog keeps renewing.
const SETTLED: Duration = Duration::from_millis(1500);
/// Renewal periods measured (the goal: no hold lost over five).
const PERIODS: u32 = 5;
/// Locks per renewal call in Redisson's design (its watchdog's batch).
const REDISSON_BATCH: f64 = 100.0;

#[derive(Default)]
struct Figures {
    fill_seconds: Vec<f64>,
    fill_script_calls: Vec<f64>,
    client_per_lock: Vec<f64>,
    blocks_per_lock: Vec<f64>,
    redis_per_lock: Vec<f64>,
    round_trips_per_period: Vec<f64>,
    redis_cpu_share: Vec<f64>,
    redis_usec_per_period: Vec<f64>,
    client_cpu_share: Vec<f64>,
    /// The client's CPU time over the periods ÷ (locks × periods), µs.
    client_usec_per_lock: Vec<f64>,
    release_seconds: Vec<f64>,
    /// Releases that returned an error (lost holds, replies too late).
    release_errors: Vec<f64>,
    /// Holds the guards report lost at the end of the periods.
    lost: Vec<f64>,
    /// The busiest commands of the periods, from the last run.
    commands: Vec<CommandStat>,
}

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let held = bench.settings.held;
    let lease = bench.settings.held_lease;
    let watch = bench.settings.held_watch;
    let url = bench.url();
    let mut conn = crate::contender::admin_connection(&bench.server).await?;
    let periods: u32 = if bench.settings.quick { 2 } else { PERIODS };
    let mut figures = Figures::default();
    for run in 0..bench.settings.runs {
        eprintln!(
            "  run {} redlatch, {} locks",
            run + 1,
            group(held as f64, 0)
        );
        one_run(&url, &mut conn, held, lease, watch, periods, &mut figures).await?;
    }
    let count = group(held as f64, 0);
    let period_ms = lease.as_millis() / 3;
    let mut section = Section::new(
        format!(
            "9. Scale: {count} locks held by one client, renewed{}",
            if watch { "" } else { " (loss watch off)" }
        ),
        format!(
            "One redlatch client (defaults, but a {} s lease, `--held-lease`, and the loss watch \
             off with `--held-no-watch`: its watchdog \
             renews every {period_ms} ms) acquires {count} distinct locks from {FILL_TASKS} tasks with \
             {IN_FLIGHT_EACH} acquires under way each, waits {:.1} s (holds watched and \
             named), then does nothing for {periods} renewal periods while the watchdog renews. \
             Over those periods: renewal round trips by `Client::renewal_round_trips()`; \
             redis-server CPU share = (used_cpu_user + used_cpu_sys of INFO cpu, difference) ÷ \
             wall time; the client's = getrusage(RUSAGE_SELF) difference ÷ wall time (2 cores: \
             1.0 is one core); INFO commandstats after CONFIG RESETSTAT (a script's time \
             includes its own calls, which are also listed apart). Memory read at the \
             start of the periods against before the fill: live heap bytes and live \
             allocations (a counting global allocator) and `used_memory`, per held lock. Script \
             calls during the fill: FCALL calls in INFO commandstats (acquires are coalesced). \
             Redisson's column is its published design, not a measurement: its watchdog renews \
             up to {REDISSON_BATCH:.0} locks per call. The size is set by `--held N` \
             (default 100,000; `--quick` 10,000).",
            lease.as_secs_f64(),
            SETTLED.as_secs_f64()
        ),
    );
    let mut table = Table::new(&[
        "figure",
        "redlatch",
        "Redisson (design: up to 100 locks per renewal call)",
    ]);
    table.numeric = vec![false, true, true];
    let cell = |values: &[f64], decimals: usize| Summary::of(values.iter().copied()).show(decimals);
    let redisson_trips = held as f64 / REDISSON_BATCH;
    let na = || "–".to_owned();
    table.row(vec![
        format!("renewal round trips per renewal period, {count} locks"),
        cell(&figures.round_trips_per_period, 1),
        group(redisson_trips, 0),
    ]);
    let per_trip: Vec<f64> = figures
        .round_trips_per_period
        .iter()
        .map(|trips| held as f64 / trips)
        .collect();
    table.row(vec![
        "holds lost by the end of the periods".into(),
        cell(&figures.lost, 0),
        na(),
    ]);
    table.row(vec![
        "locks renewed per round trip".into(),
        cell(&per_trip, 0),
        group(REDISSON_BATCH, 0),
    ]);
    table.row(vec![
        "redis-server CPU share while renewing (CPU s ÷ wall s)".into(),
        cell(&figures.redis_cpu_share, 3),
        na(),
    ]);
    table.row(vec![
        "redis-server µs in script calls per renewal period (commandstats, FCALL/EVALSHA)".into(),
        cell(&figures.redis_usec_per_period, 0),
        na(),
    ]);
    let per_lock: Vec<f64> = figures
        .redis_usec_per_period
        .iter()
        .map(|usec| usec / held as f64)
        .collect();
    table.row(vec![
        "  per lock renewed (µs)".into(),
        cell(&per_lock, 2),
        na(),
    ]);
    table.row(vec![
        "client CPU share while renewing (CPU s ÷ wall s)".into(),
        cell(&figures.client_cpu_share, 3),
        na(),
    ]);
    table.row(vec![
        "  client CPU per lock per renewal period (µs)".into(),
        cell(&figures.client_usec_per_lock, 2),
        na(),
    ]);
    table.row(vec![
        "client heap per held lock (bytes)".into(),
        cell(&figures.client_per_lock, 0),
        na(),
    ]);
    table.row(vec![
        "client live allocations per held lock".into(),
        cell(&figures.blocks_per_lock, 1),
        na(),
    ]);
    table.row(vec![
        "Redis used_memory per held lock (bytes)".into(),
        cell(&figures.redis_per_lock, 0),
        na(),
    ]);
    table.row(vec![
        format!("time to acquire {count} locks (s)"),
        cell(&figures.fill_seconds, 2),
        na(),
    ]);
    let fill_per_call: Vec<f64> = figures
        .fill_script_calls
        .iter()
        .map(|calls| held as f64 / calls)
        .collect();
    table.row(vec![
        "acquires per script call during the fill".into(),
        cell(&fill_per_call, 1),
        na(),
    ]);
    table.row(vec![
        format!("time to release {count} locks (s)"),
        cell(&figures.release_seconds, 2),
        na(),
    ]);
    table.row(vec![
        "releases that returned an error".into(),
        cell(&figures.release_errors, 0),
        na(),
    ]);
    section.tables.push(table);

    let per_period = Summary::of(figures.round_trips_per_period.iter().copied()).median;
    section.notes.push(format!(
        "Goal about one renewal round trip per 100 locks ({} per period for {count}): {} per period.",
        group(redisson_trips, 0),
        group(per_period, 1),
    ));
    if !figures.commands.is_empty() {
        let busiest: Vec<String> = figures
            .commands
            .iter()
            .take(5)
            .map(|c| {
                format!(
                    "`{}` {} calls, {} µs ({:.1} µs per call)",
                    c.name,
                    group(c.calls as f64, 0),
                    group(c.usec as f64, 0),
                    c.usec as f64 / c.calls.max(1) as f64
                )
            })
            .collect();
        section.notes.push(format!(
            "Busiest commands over the {periods} periods of the last run (commandstats): {}.",
            busiest.join("; ")
        ));
    }
    Ok(section)
}

async fn one_run(
    url: &str,
    conn: &mut MultiplexedConnection,
    held: usize,
    lease: Duration,
    watch: bool,
    periods: u32,
    figures: &mut Figures,
) -> Result<(), String> {
    let client = redlatch::Client::builder(url)
        .default_lease(lease)
        .watch_holds(watch)
        .connect()
        .await
        .map_err(|error| format!("redlatch connect: {error}"))?;
    // Open the connections before measuring.
    client
        .lock("bench:held:warm")
        .acquire()
        .await
        .map_err(|error| format!("redlatch acquire: {error}"))?
        .release()
        .await
        .map_err(|error| format!("redlatch release: {error}"))?;
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async::<()>(conn)
        .await
        .map_err(|error| format!("FLUSHALL: {error}"))?;
    let redis_before = used_memory(conn).await?;
    redis_info::reset_stats(conn).await?;
    let (heap_before, blocks_before) = (live_bytes(), live_blocks());

    let started = Instant::now();
    let chunk = held.div_ceil(FILL_TASKS);
    let fillers: Vec<_> = (0..FILL_TASKS)
        .map(|task| {
            let client = client.clone();
            let range = (task * chunk)..((task + 1) * chunk).min(held);
            tokio::spawn(async move {
                stream::iter(range)
                    .map(|i| {
                        let lock = client.lock(format!("bench:held:{i}"));
                        async move { lock.acquire().await }
                    })
                    .buffer_unordered(IN_FLIGHT_EACH)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect::<Result<Vec<redlatch::Guard>, _>>()
            })
        })
        .collect();
    let mut guards: Vec<redlatch::Guard> = Vec::with_capacity(held);
    for filler in fillers {
        let part = filler
            .await
            .map_err(|error| format!("fill task: {error}"))?
            .map_err(|error| format!("redlatch acquire: {error}"))?;
        guards.extend(part);
    }
    figures.fill_seconds.push(started.elapsed().as_secs_f64());
    let fill_calls: u64 = redis_info::command_stats(conn)
        .await?
        .iter()
        .filter(|c| c.name == "fcall" || c.name == "evalsha")
        .map(|c| c.calls)
        .sum();
    figures.fill_script_calls.push(fill_calls as f64);

    tokio::time::sleep(SETTLED).await;
    figures
        .client_per_lock
        .push((live_bytes() - heap_before) as f64 / held as f64);
    figures
        .blocks_per_lock
        .push((live_blocks() - blocks_before) as f64 / held as f64);
    figures
        .redis_per_lock
        .push((used_memory(conn).await? - redis_before) as f64 / held as f64);

    redis_info::reset_stats(conn).await?;
    let renewals_before = client.renewal_round_trips();
    let redis_cpu_before = used_cpu(conn).await?;
    let client_cpu_before = own_cpu();
    let wall = Instant::now();
    tokio::time::sleep(lease / 3 * periods).await;
    let client_cpu = own_cpu() - client_cpu_before;
    let redis_cpu = used_cpu(conn).await? - redis_cpu_before;
    let wall = wall.elapsed().as_secs_f64();
    let renewals = client.renewal_round_trips() - renewals_before;
    let commands = redis_info::command_stats(conn).await?;
    // A script's own calls are counted apart and inside its time: the
    // top-level script calls are the server's time for the renewals.
    let usec: u64 = commands
        .iter()
        .filter(|c| c.name == "fcall" || c.name == "evalsha")
        .map(|c| c.usec)
        .sum();
    figures
        .round_trips_per_period
        .push(renewals as f64 / f64::from(periods));
    figures.redis_cpu_share.push(redis_cpu / wall);
    figures.client_cpu_share.push(client_cpu / wall);
    figures
        .client_usec_per_lock
        .push(client_cpu * 1e6 / (held as f64 * f64::from(periods)));
    figures
        .redis_usec_per_period
        .push(usec as f64 / f64::from(periods));
    figures.commands = commands;
    let lost = guards.iter().filter(|guard| !guard.is_held()).count();
    figures.lost.push(lost as f64);
    eprintln!(
        "    fill {:.2} s, {renewals} renewal calls, redis CPU {:.2} s, client CPU {:.2} s in {wall:.2} s, {lost} lost",
        figures.fill_seconds.last().copied().unwrap_or(f64::NAN),
        redis_cpu,
        client_cpu
    );

    let started = Instant::now();
    let mut parts: Vec<Vec<redlatch::Guard>> = Vec::with_capacity(FILL_TASKS);
    while !guards.is_empty() {
        let rest = guards.split_off(guards.len().saturating_sub(chunk));
        parts.push(rest);
    }
    let releasers: Vec<_> = parts
        .into_iter()
        .map(|part| {
            tokio::spawn(async move {
                stream::iter(part)
                    .map(|guard| guard.release())
                    .buffer_unordered(IN_FLIGHT_EACH)
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .filter_map(Result::err)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    // Release errors are counted, not fatal: a hold lost during the periods
    // fails its release, and a release whose reply is late says so.
    let mut release_errors = 0usize;
    for releaser in releasers {
        let errors = releaser
            .await
            .map_err(|error| format!("release task: {error}"))?;
        if let Some(first) = errors.first()
            && release_errors == 0
        {
            eprintln!("    first release error: {first}");
        }
        release_errors += errors.len();
    }
    figures.release_errors.push(release_errors as f64);
    figures
        .release_seconds
        .push(started.elapsed().as_secs_f64());
    Ok(())
}

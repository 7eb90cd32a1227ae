//! Lock throughput and hand-off latency of redlatch against one local redis-server.
//!
//! Measures, all in one process run against one throwaway `redis-server`
//! (started through `testkit::RedisServer::start()`):
//!
//! 1. **Uncontended cycles/s.** T tasks (T = 1, 16, 64) on one
//!    [`redlatch::Client`], each looping `acquire` → `release` on a key of its
//!    own. Side by side, the raw baseline on one redis-rs
//!    `MultiplexedConnection` (TCP_NODELAY): `SET key token NX PX 30000`, then
//!    a Lua compare-and-delete. Both do two round trips per cycle, so the
//!    ratio redlatch / raw is the cost of everything the library adds.
//! 2. **Hand-off under contention.** 16 tasks on one client fight for one key,
//!    each looping acquire → release with no work in between. Reports
//!    acquisitions/s, the hand-off latency to another waiter (previous
//!    holder's release returned → next holder's acquire returned), the
//!    longest wait in `acquire`, and how evenly the tasks were served.
//!
//! Every figure is the median over the runs, with min..max across runs.
//! Redis errors never panic: they are counted and listed at the end.
//!
//! ```text
//! cargo bench -p redlatch --bench lock                  # 5 runs × 2 s per measurement, < 2 min
//! cargo bench -p redlatch --bench lock -- --quick       # 3 runs × 0.4 s, < 20 s
//! cargo bench -p redlatch --bench lock -- --runs 10 --seconds 3
//! ```

use std::collections::BTreeMap;
use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redis::IntoConnectionInfo;
use redis::aio::MultiplexedConnection;
use redlatch::Client;
use testkit::RedisServer;

/// Task counts of the uncontended measurement.
const UNCONTENDED_TASKS: [usize; 3] = [1, 16, 64];
/// Tasks fighting for the hot key.
const HOT_TASKS: usize = 16;
const HOT_KEY: &str = "bench:hot";
/// Lease of the raw baseline's `SET NX PX`, as long as redlatch's default lease.
const RAW_LEASE_MS: u64 = 30_000;
const RAW_RELEASE_LUA: &str =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
/// A waiter still in `acquire` this long after the run ended is given up on
/// (and counted as an error), so a lost wake-up cannot stall the bench for a
/// whole 30 s lease.
const STALL_GRACE: Duration = Duration::from_secs(2);
/// Pause after an error, so a broken server does not turn a task into a busy loop.
const ERROR_BACKOFF: Duration = Duration::from_millis(5);
/// Distinct error messages kept; the rest are lumped together.
const MAX_ERROR_KINDS: usize = 20;

fn main() {
    let settings = match Settings::from_args(std::env::args().skip(1)) {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let server = match RedisServer::start() {
        Ok(server) => server,
        Err(error) => {
            eprintln!("cannot start redis-server: {error}");
            std::process::exit(1);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    if let Err(message) = runtime.block_on(run_bench(&server, &settings)) {
        eprintln!("bench aborted: {message}");
        std::process::exit(1);
    }
}

const USAGE: &str =
    "usage: cargo bench -p redlatch --bench lock -- [--quick] [--runs N] [--seconds S]";

/// Command-line settings.
struct Settings {
    runs: usize,
    run_time: Duration,
    warmup: Duration,
}

impl Settings {
    fn from_args(mut args: impl Iterator<Item = String>) -> Result<Settings, String> {
        let (mut runs, mut seconds, mut quick) = (None, None, false);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--runs" => runs = Some(parse_value::<usize>(&arg, args.next())?),
                "--seconds" => seconds = Some(parse_value::<f64>(&arg, args.next())?),
                // `cargo bench` passes `--bench` to harness-less benches.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let runs = runs.unwrap_or(if quick { 3 } else { 5 });
        let seconds = seconds.unwrap_or(if quick { 0.4 } else { 2.0 });
        if runs == 0 || !(seconds > 0.0 && seconds <= 3600.0) {
            return Err("--runs must be ≥ 1 and --seconds in (0, 3600]".to_owned());
        }
        let run_time = Duration::from_secs_f64(seconds);
        Ok(Settings {
            runs,
            run_time,
            warmup: run_time.min(Duration::from_millis(300)),
        })
    }
}

fn parse_value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("{flag}: cannot parse {value:?}"))
}

/// Error messages and how often each occurred.
#[derive(Default)]
struct Errors(BTreeMap<String, u64>);

impl Errors {
    fn note(&mut self, what: &str, error: impl Display) {
        let mut message = format!("{what}: {error}");
        if self.0.len() >= MAX_ERROR_KINDS && !self.0.contains_key(&message) {
            message = "(other errors)".to_owned();
        }
        *self.0.entry(message).or_default() += 1;
    }

    fn merge(&mut self, other: Errors) {
        for (message, count) in other.0 {
            *self.0.entry(message).or_default() += count;
        }
    }

    fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// Runs every measurement `settings.runs` times, then prints the tables.
async fn run_bench(server: &RedisServer, settings: &Settings) -> Result<(), String> {
    let client = Client::connect(&server.url())
        .await
        .map_err(|error| format!("redlatch connect: {error}"))?;
    let raw = raw_connection(server).await?;
    print_machine(raw.clone(), settings).await;

    // Unmeasured warm-up: connections, script cache, allocator, CPU clocks.
    let mut errors = Errors::default();
    errors.merge(
        redlatch_cycles(&client, HOT_TASKS, settings.warmup)
            .await
            .errors,
    );
    errors.merge(raw_cycles(&raw, HOT_TASKS, settings.warmup).await.errors);

    let (uncontended, handoffs) = measure_runs(&client, &raw, settings, &mut errors).await;
    print_uncontended(&uncontended);
    print_handoff(&handoffs);
    for run in uncontended {
        for (ours, theirs) in run {
            errors.merge(ours.errors);
            errors.merge(theirs.errors);
        }
    }
    print_errors(&errors);
    Ok(())
}

/// Uncontended cycles for every task count (redlatch and raw side by side),
/// then the contended hand-off, once per run.
async fn measure_runs(
    client: &Client,
    raw: &MultiplexedConnection,
    settings: &Settings,
    errors: &mut Errors,
) -> (Vec<Vec<(Throughput, Throughput)>>, Vec<HandoffStats>) {
    let (mut uncontended, mut handoffs) = (Vec::new(), Vec::new());
    for _ in 0..settings.runs {
        // Interleave the measurements so slow drift of the machine hits them alike.
        let mut pairs = Vec::new();
        for tasks in UNCONTENDED_TASKS {
            let ours = redlatch_cycles(client, tasks, settings.run_time).await;
            let theirs = raw_cycles(raw, tasks, settings.run_time).await;
            pairs.push((ours, theirs));
        }
        uncontended.push(pairs);
        let run = handoff_run(client, settings.run_time).await;
        handoffs.push(HandoffStats::from_run(run, errors));
    }
    (uncontended, handoffs)
}

/// One redis-rs multiplexed connection with TCP_NODELAY, like redlatch's own.
async fn raw_connection(server: &RedisServer) -> Result<MultiplexedConnection, String> {
    let info = server
        .url()
        .as_str()
        .into_connection_info()
        .map_err(|error| format!("raw URL: {error}"))?
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info).map_err(|error| format!("raw client: {error}"))?;
    // Same response timeout as redlatch's default, not redis-rs's 500 ms.
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(3)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|error| format!("raw connect: {error}"))
}

/// Spawns `tasks` copies of `body` (given the task index) and collects their outputs.
async fn spawn_tasks<F, Fut, T>(tasks: usize, body: F) -> Vec<Result<T, String>>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = (0..tasks).map(|task| tokio::spawn(body(task))).collect();
    let mut outputs = Vec::with_capacity(tasks);
    for handle in handles {
        outputs.push(handle.await.map_err(|error| error.to_string()));
    }
    outputs
}

/// Completed acquire+release cycles of one uncontended measurement.
struct Throughput {
    cycles: u64,
    elapsed: Duration,
    errors: Errors,
}

impl Throughput {
    fn per_second(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64()
    }

    /// Adds up the per-task `(cycles, errors)`; `elapsed` runs until the last task stopped.
    fn collect(outputs: Vec<Result<(u64, Errors), String>>, started: Instant) -> Throughput {
        let elapsed = started.elapsed();
        let mut total = Throughput {
            cycles: 0,
            elapsed,
            errors: Errors::default(),
        };
        for output in outputs {
            match output {
                Ok((cycles, errors)) => {
                    total.cycles += cycles;
                    total.errors.merge(errors);
                }
                Err(error) => total.errors.note("task died", error),
            }
        }
        total
    }
}

/// `tasks` tasks on one client, each cycling a lock of its own.
async fn redlatch_cycles(client: &Client, tasks: usize, run_time: Duration) -> Throughput {
    let started = Instant::now();
    let deadline = started + run_time;
    let outputs = spawn_tasks(tasks, |task| {
        let lock = client.lock(format!("bench:u:{task}"));
        async move {
            let (mut cycles, mut errors) = (0, Errors::default());
            while Instant::now() < deadline {
                match redlatch_cycle(&lock).await {
                    Ok(()) => cycles += 1,
                    Err((what, error)) => {
                        errors.note(what, error);
                        tokio::time::sleep(ERROR_BACKOFF).await;
                    }
                }
            }
            (cycles, errors)
        }
    })
    .await;
    Throughput::collect(outputs, started)
}

async fn redlatch_cycle(lock: &redlatch::Lock) -> Result<(), (&'static str, redlatch::Error)> {
    let guard = lock
        .acquire()
        .await
        .map_err(|error| ("redlatch acquire", error))?;
    guard
        .release()
        .await
        .map_err(|error| ("redlatch release", error))
}

/// The raw baseline: `tasks` tasks on one multiplexed connection.
async fn raw_cycles(conn: &MultiplexedConnection, tasks: usize, run_time: Duration) -> Throughput {
    let started = Instant::now();
    let deadline = started + run_time;
    let outputs = spawn_tasks(tasks, |task| {
        let mut conn = conn.clone();
        async move {
            let script = redis::Script::new(RAW_RELEASE_LUA);
            let key = format!("bench:raw:{task}");
            let (mut cycles, mut errors) = (0u64, Errors::default());
            while Instant::now() < deadline {
                // A fresh token per acquisition, as a real lock needs.
                let token = format!("{task}:{cycles}");
                match raw_cycle(&mut conn, &script, &key, &token).await {
                    Ok(()) => cycles += 1,
                    Err((what, error)) => {
                        errors.note(what, error);
                        tokio::time::sleep(ERROR_BACKOFF).await;
                    }
                }
            }
            (cycles, errors)
        }
    })
    .await;
    Throughput::collect(outputs, started)
}

async fn raw_cycle(
    conn: &mut MultiplexedConnection,
    script: &redis::Script,
    key: &str,
    token: &str,
) -> Result<(), (&'static str, String)> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(RAW_LEASE_MS)
        .query_async(conn)
        .await
        .map_err(|error| ("raw SET NX", error.to_string()))?;
    if set.is_none() {
        return Err(("raw SET NX", "key already held".to_owned()));
    }
    let deleted: i64 = script
        .key(key)
        .arg(token)
        .invoke_async(conn)
        .await
        .map_err(|error| ("raw release", error.to_string()))?;
    match deleted {
        1 => Ok(()),
        _ => Err(("raw release", "token did not match".to_owned())),
    }
}

/// One acquisition of the hot key.
struct Acquisition {
    task: usize,
    /// `acquire` was called.
    called: Instant,
    /// `acquire` returned the guard.
    acquired: Instant,
    /// Right before `release` was called.
    release_called: Instant,
    /// `release` returned: the hand-off reference point.
    released: Instant,
}

/// Everything one contended run recorded.
struct HandoffRun {
    acquisitions: Vec<Acquisition>,
    started: Instant,
    errors: Errors,
}

/// `HOT_TASKS` tasks on one client looping acquire → release on one key.
async fn handoff_run(client: &Client, run_time: Duration) -> HandoffRun {
    let started = Instant::now();
    let deadline = started + run_time;
    let outputs = spawn_tasks(HOT_TASKS, |task| {
        hot_task(client.lock(HOT_KEY), task, deadline)
    })
    .await;
    let mut run = HandoffRun {
        acquisitions: Vec::new(),
        started,
        errors: Errors::default(),
    };
    for output in outputs {
        match output {
            Ok((acquisitions, errors)) => {
                run.acquisitions.extend(acquisitions);
                run.errors.merge(errors);
            }
            Err(error) => run.errors.note("task died", error),
        }
    }
    run
}

async fn hot_task(
    lock: redlatch::Lock,
    task: usize,
    deadline: Instant,
) -> (Vec<Acquisition>, Errors) {
    let (mut acquisitions, mut errors) = (Vec::new(), Errors::default());
    let give_up = tokio::time::Instant::from_std(deadline + STALL_GRACE);
    while Instant::now() < deadline {
        let called = Instant::now();
        let guard = match tokio::time::timeout_at(give_up, lock.acquire()).await {
            Ok(Ok(guard)) => guard,
            Ok(Err(error)) => {
                errors.note("hot acquire", error);
                tokio::time::sleep(ERROR_BACKOFF).await;
                continue;
            }
            Err(_) => {
                errors.note("hot acquire", "still waiting 2 s after the run ended");
                break;
            }
        };
        let acquired = Instant::now();
        // The critical section is empty: the hold is just this clock read.
        let release_called = Instant::now();
        let outcome = guard.release().await;
        let released = Instant::now();
        if let Err(error) = outcome {
            errors.note("hot release", error);
        }
        acquisitions.push(Acquisition {
            task,
            called,
            acquired,
            release_called,
            released,
        });
    }
    (acquisitions, errors)
}

/// The figures of one contended run.
struct HandoffStats {
    acquisitions_per_sec: f64,
    handoffs: f64,
    handoff_p50_us: f64,
    handoff_p99_us: f64,
    handoff_max_us: f64,
    negative_handoffs: f64,
    full_handoff_p50_us: f64,
    full_handoff_p99_us: f64,
    release_p50_us: f64,
    release_p99_us: f64,
    longest_wait_ms: f64,
    per_task_min: f64,
    per_task_max: f64,
    per_task_ratio: f64,
    errors: f64,
}

impl HandoffStats {
    /// Computes the figures; the run's errors move into `errors`.
    fn from_run(mut run: HandoffRun, errors: &mut Errors) -> HandoffStats {
        run.acquisitions
            .sort_by_key(|acquisition| acquisition.acquired);
        let span = run
            .acquisitions
            .iter()
            .map(|acquisition| acquisition.released)
            .max()
            .map_or(Duration::ZERO, |last| last - run.started);
        let (handoff, negative) = handoff_latencies(&run.acquisitions, |a| a.released);
        // The whole hand-off, the release round trip included.
        let (full_handoff, _) = handoff_latencies(&run.acquisitions, |a| a.release_called);
        let release = release_latencies(&run.acquisitions);
        let (per_task_min, per_task_max) = per_task_range(&run.acquisitions);
        let error_count = run.errors.total() as f64;
        errors.merge(run.errors);
        HandoffStats {
            acquisitions_per_sec: run.acquisitions.len() as f64 / span.as_secs_f64().max(1e-9),
            handoffs: handoff.len() as f64,
            handoff_p50_us: micros(handoff.value_at_quantile(0.50)),
            handoff_p99_us: micros(handoff.value_at_quantile(0.99)),
            handoff_max_us: micros(handoff.max()),
            negative_handoffs: negative as f64,
            full_handoff_p50_us: micros(full_handoff.value_at_quantile(0.50)),
            full_handoff_p99_us: micros(full_handoff.value_at_quantile(0.99)),
            release_p50_us: micros(release.value_at_quantile(0.50)),
            release_p99_us: micros(release.value_at_quantile(0.99)),
            longest_wait_ms: longest_wait(&run.acquisitions).as_secs_f64() * 1e3,
            per_task_min,
            per_task_max,
            per_task_ratio: per_task_max / per_task_min,
            errors: error_count,
        }
    }
}

/// Nanosecond histogram up to a minute; three significant digits are plenty
/// for µs figures. Fixed bounds: `saturating_record` never auto-resizes.
fn nanos_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn micros(nanos: u64) -> f64 {
    nanos as f64 / 1e3
}

/// Hand-off latencies (ns) between different consecutive holders, measured
/// from the previous holder's `since` instant, and how many came out negative
/// (the next acquire returned before that instant was read).
fn handoff_latencies(
    sorted: &[Acquisition],
    since: fn(&Acquisition) -> Instant,
) -> (Histogram<u64>, u64) {
    let mut histogram = nanos_histogram();
    let mut negative = 0;
    for pair in sorted.windows(2) {
        let (previous, next) = (&pair[0], &pair[1]);
        if previous.task == next.task {
            continue;
        }
        match next.acquired.checked_duration_since(since(previous)) {
            Some(latency) => histogram.saturating_record(latency.as_nanos() as u64),
            None => negative += 1,
        }
    }
    (histogram, negative)
}

/// How long `release` took (ns): the holder's share of each hand-off.
fn release_latencies(acquisitions: &[Acquisition]) -> Histogram<u64> {
    let mut histogram = nanos_histogram();
    for acquisition in acquisitions {
        let took = acquisition.released - acquisition.release_called;
        histogram.saturating_record(took.as_nanos() as u64);
    }
    histogram
}

fn longest_wait(acquisitions: &[Acquisition]) -> Duration {
    acquisitions
        .iter()
        .map(|acquisition| acquisition.acquired - acquisition.called)
        .max()
        .unwrap_or_default()
}

/// Fewest and most acquisitions of any task (a task that never got it counts 0).
fn per_task_range(acquisitions: &[Acquisition]) -> (f64, f64) {
    let mut counts = [0u64; HOT_TASKS];
    for acquisition in acquisitions {
        counts[acquisition.task] += 1;
    }
    let min = counts.iter().min().copied().unwrap_or(0);
    let max = counts.iter().max().copied().unwrap_or(0);
    (min as f64, max as f64)
}

/// Median and range of one figure across runs.
struct Summary {
    median: f64,
    min: f64,
    max: f64,
}

impl Summary {
    fn of(values: impl IntoIterator<Item = f64>) -> Summary {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Summary {
            median,
            min: values.first().copied().unwrap_or(f64::NAN),
            max: values.last().copied().unwrap_or(f64::NAN),
        }
    }

    fn show(&self, decimals: usize) -> String {
        let (median, min, max) = (self.median, self.min, self.max);
        format!("{median:.decimals$} ({min:.decimals$}..{max:.decimals$})")
    }
}

/// Machine line: CPUs, redis-server and rustc versions, settings.
async fn print_machine(mut conn: MultiplexedConnection, settings: &Settings) {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    let redis_version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_owned();
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map_or_else(|| "unknown".to_owned(), |text| text.trim().to_owned());
    println!(
        "Machine: nproc {cpus}, redis-server {redis_version} (local, same machine), {rustc}, \
         tokio multi-thread runtime with {cpus} workers"
    );
    println!(
        "Settings: {} runs × {:.1} s per measurement; figures are median (min..max) across runs\n",
        settings.runs,
        settings.run_time.as_secs_f64()
    );
}

fn print_uncontended(runs: &[Vec<(Throughput, Throughput)>]) {
    println!("### Uncontended acquire+release cycles/s (one key per task)\n");
    println!(
        "| tasks | redlatch (1 Client) | raw SET NX + Lua del (1 MultiplexedConnection) | redlatch / raw | errors redlatch / raw |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for (index, tasks) in UNCONTENDED_TASKS.iter().enumerate() {
        let pairs: Vec<&(Throughput, Throughput)> = runs.iter().map(|run| &run[index]).collect();
        let ours = Summary::of(pairs.iter().map(|(ours, _)| ours.per_second()));
        let raw = Summary::of(pairs.iter().map(|(_, raw)| raw.per_second()));
        let ratio = Summary::of(
            pairs
                .iter()
                .map(|(ours, raw)| ours.per_second() / raw.per_second()),
        );
        let errors_ours: u64 = pairs.iter().map(|(ours, _)| ours.errors.total()).sum();
        let errors_raw: u64 = pairs.iter().map(|(_, raw)| raw.errors.total()).sum();
        println!(
            "| {tasks} | {} | {} | {} | {errors_ours} / {errors_raw} |",
            ours.show(0),
            raw.show(0),
            ratio.show(2)
        );
    }
    println!();
}

fn print_handoff(runs: &[HandoffStats]) {
    println!("### Hand-off under contention: {HOT_TASKS} tasks, 1 Client, key `{HOT_KEY}`\n");
    println!("| figure | median (min..max) |");
    println!("|---|---:|");
    let row = |label: &str, figure: fn(&HandoffStats) -> f64, decimals: usize| {
        let summary = Summary::of(runs.iter().map(figure));
        println!("| {label} | {} |", summary.show(decimals));
    };
    row("acquisitions/s", |s| s.acquisitions_per_sec, 0);
    row("hand-offs to another task (count)", |s| s.handoffs, 0);
    row(
        "hand-off latency p50 (µs), from release() return",
        |s| s.handoff_p50_us,
        1,
    );
    row(
        "hand-off latency p99 (µs), from release() return",
        |s| s.handoff_p99_us,
        1,
    );
    row(
        "hand-off latency max (µs), from release() return",
        |s| s.handoff_max_us,
        1,
    );
    row(
        "negative hand-offs ignored (count)",
        |s| s.negative_handoffs,
        0,
    );
    row(
        "hand-off from the release() call, p50 (µs)",
        |s| s.full_handoff_p50_us,
        1,
    );
    row(
        "hand-off from the release() call, p99 (µs)",
        |s| s.full_handoff_p99_us,
        1,
    );
    row("release() call p50 (µs)", |s| s.release_p50_us, 1);
    row("release() call p99 (µs)", |s| s.release_p99_us, 1);
    row("longest wait in acquire() (ms)", |s| s.longest_wait_ms, 1);
    row("acquisitions per task, min", |s| s.per_task_min, 0);
    row("acquisitions per task, max", |s| s.per_task_max, 0);
    row("acquisitions per task, max/min", |s| s.per_task_ratio, 2);
    row("errors", |s| s.errors, 0);
    println!();
}

fn print_errors(errors: &Errors) {
    println!("### Errors (all runs and warm-up)\n");
    if errors.0.is_empty() {
        println!("none");
        return;
    }
    println!("| count | error |");
    println!("|---:|---|");
    for (message, count) in &errors.0 {
        println!("| {count} | {} |", message.replace('|', "\\|"));
    }
}

//! Throughput and latency of the grab endpoint (`POST /vouchers/{id}/orders`)
//! against the HTTP limit of the same machine.
//!
//! In one process, against one throwaway `redis-server`
//! (`testkit::RedisServer::start()`), each run measures three endpoints with
//! the same driver, one after the other:
//!
//! 1. **trivial**: a minimal axum 0.8 server started by this bench, whose
//!    `POST /trivial` answers 201 `{"order_id":1}` at once — the JSON shape of
//!    a granted order, no work behind it. It runs on a Tokio runtime of its own
//!    with as many workers as a seckill instance, so the only difference with
//!    the shop is the work behind the endpoint.
//! 2. **redis-lock** and 3. **reserve**: Redis `FLUSHDB`, a fresh SQLite
//!    database in a temporary directory, ONE in-process instance
//!    (`seckill::serve::start`, normal schema), a voucher with `--stock` units
//!    open now.
//!
//! The driver: one `reqwest::Client` (connection pool of C, TCP_NODELAY),
//! warmed with C concurrent `GET /health` so no handshake is timed, then
//! users 1..=N click once each (`X-User-Id`), C requests in flight (C tasks
//! taking the next user in turn). req/s counts every answer (201 and 410)
//! from the first click to the last answer; latency is per request, body
//! read included (HdrHistogram, µs).
//!
//! While the shop sells, a poller reads the voucher's database stock every
//! 5 ms on a connection of its own (for both strategies, so both carry its
//! cost): the moment every order is in the database. For `reserve`, whose
//! stream consumer writes orders after answering, that gives the drain.
//!
//! After each run the sale is verified against the database: exactly
//! min(users, stock) answers 201 and orders, remaining stock = stock − orders,
//! no duplicate user, every granted order id stored, no answer other than 201
//! or 410. A run that fails is reported with a warning and left out of the
//! figures. Figures are medians over the runs with min..max.
//!
//! ```text
//! cargo bench -p seckill --bench grab                 # 3 runs × 10000 users, stock 1000, 64 in flight
//! cargo bench -p seckill --bench grab -- --quick      # 1 run × 2000 users, stock 200
//! cargo bench -p seckill --bench grab -- --runs 5 --users 20000 --stock 500 --concurrency 128
//! ```
//!
//! `seckill::load::run_load` is not reused: it needs a voucher to read back,
//! which the trivial endpoint has not, and the comparison is only fair if the
//! three endpoints are driven by the same code.

use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use hdrhistogram::Histogram;
use seckill::db::Db;
use seckill::serve::ServiceConfig;
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};
use testkit::RedisServer;
use tokio::task::JoinSet;

/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the poller reads the database stock.
const DRAIN_POLL: Duration = Duration::from_millis(5);
/// Longest wait, after the last answer, for the orders to reach the database.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The strategies measured, in the order of a run (after the trivial endpoint).
const STRATEGIES: [StrategyKind; 2] = [StrategyKind::RedisLock, StrategyKind::Reserve];
/// The goal: reserve at least this fraction of the trivial endpoint's req/s.
const GOAL_RATIO: f64 = 0.5;

const USAGE: &str = "usage: cargo bench -p seckill --bench grab -- [--quick] [--runs N] [--users N] [--stock N] [--concurrency C]";

fn main() {
    let settings = match Settings::from_args(std::env::args().skip(1)) {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let redis = match RedisServer::start() {
        Ok(server) => server,
        Err(error) => {
            eprintln!("cannot start redis-server: {error}");
            std::process::exit(1);
        }
    };
    let trivial = match Trivial::start() {
        Ok(trivial) => trivial,
        Err(error) => {
            eprintln!("cannot start the trivial server: {error}");
            std::process::exit(1);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    let outcome = runtime.block_on(run_bench(&redis, &trivial, &settings));
    trivial.stop();
    if let Err(message) = outcome {
        eprintln!("bench aborted: {message}");
        std::process::exit(1);
    }
}

/// Command-line settings.
struct Settings {
    runs: usize,
    users: u64,
    stock: u64,
    concurrency: usize,
}

impl Settings {
    fn from_args(mut args: impl Iterator<Item = String>) -> Result<Settings, String> {
        let (mut runs, mut users, mut stock, mut concurrency, mut quick) =
            (None, None, None, None, false);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--runs" => runs = Some(parse_value::<usize>(&arg, args.next())?),
                "--users" => users = Some(parse_value::<u64>(&arg, args.next())?),
                "--stock" => stock = Some(parse_value::<u64>(&arg, args.next())?),
                "--concurrency" => concurrency = Some(parse_value::<usize>(&arg, args.next())?),
                // `cargo bench` passes `--bench` to harness-less benches.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let settings = Settings {
            runs: runs.unwrap_or(if quick { 1 } else { 3 }),
            users: users.unwrap_or(if quick { 2_000 } else { 10_000 }),
            stock: stock.unwrap_or(if quick { 200 } else { 1_000 }),
            concurrency: concurrency.unwrap_or(64),
        };
        if settings.runs == 0 || settings.users == 0 || settings.concurrency == 0 {
            return Err("--runs, --users and --concurrency must be ≥ 1".to_owned());
        }
        if settings.users > 10_000_000
            || settings.stock > 1_000_000_000
            || settings.concurrency > 10_000
        {
            return Err(
                "--users ≤ 10000000, --stock ≤ 1000000000, --concurrency ≤ 10000".to_owned(),
            );
        }
        Ok(settings)
    }

    /// Orders a clean sale ends with.
    fn expected_orders(&self) -> u64 {
        self.users.min(self.stock)
    }

    fn command(&self) -> String {
        format!(
            "cargo bench -p seckill --bench grab -- --runs {} --users {} --stock {} --concurrency {}",
            self.runs, self.users, self.stock, self.concurrency
        )
    }
}

fn parse_value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("{flag}: cannot parse {value:?}"))
}

/// Tokio workers of a seckill instance (as `seckill::serve::start_tuned`),
/// given to the trivial server too.
fn server_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8)
}

/// The HTTP limit: a minimal axum server on a runtime of its own.
struct Trivial {
    addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
}

impl Trivial {
    fn start() -> std::io::Result<Trivial> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(server_workers())
            .thread_name("trivial")
            .enable_all()
            .build()?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route(
                "/trivial",
                post(|| async { (StatusCode::CREATED, Json(json!({ "order_id": 1 }))) }),
            )
            .route("/health", get(|| async { Json(json!({ "status": "ok" })) }));
        runtime.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(error) => {
                    eprintln!("trivial server: {error}");
                    return;
                }
            };
            if let Err(error) = axum::serve(listener, app).await {
                eprintln!("trivial server stopped: {error}");
            }
        });
        Ok(Trivial { addr, runtime })
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn stop(self) {
        self.runtime.shutdown_background();
    }
}

/// The three endpoints of a run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Trivial,
    Shop(StrategyKind),
}

impl Target {
    fn all() -> Vec<Target> {
        let mut all = vec![Target::Trivial];
        all.extend(STRATEGIES.map(Target::Shop));
        all
    }

    fn label(self) -> String {
        match self {
            Target::Trivial => "trivial `POST /trivial`".to_owned(),
            Target::Shop(strategy) => format!("`{strategy}`"),
        }
    }

    fn name(self) -> String {
        match self {
            Target::Trivial => "trivial".to_owned(),
            Target::Shop(strategy) => strategy.to_string(),
        }
    }
}

/// One endpoint measured once.
struct Measured {
    target: Target,
    run: usize,
    fired: Fired,
    /// Shop only: first click → every order in the database.
    all_written: Option<Duration>,
    /// Why the run cannot be reported; empty when it is clean.
    problems: Vec<String>,
    /// Shop only: orders found, remaining stock.
    found: Option<(u64, i64)>,
}

impl Measured {
    fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn per_second(&self) -> f64 {
        self.fired.requests as f64 / self.fired.elapsed.as_secs_f64().max(1e-9)
    }

    /// The drain: the last answer → every order in the database (0 when they
    /// were all written before).
    fn drain(&self) -> Option<Duration> {
        self.all_written
            .map(|written| written.saturating_sub(self.fired.elapsed))
    }
}

async fn run_bench(
    redis: &RedisServer,
    trivial: &Trivial,
    settings: &Settings,
) -> Result<(), String> {
    let started = Instant::now();
    let machine = machine_line(redis).await;
    let mut measured = Vec::new();
    for run in 1..=settings.runs {
        for target in Target::all() {
            let result = match target {
                Target::Trivial => measure_trivial(trivial, settings, run).await?,
                Target::Shop(strategy) => {
                    measure_shop(&redis.url(), strategy, settings, run).await?
                }
            };
            eprintln!(
                "run {run}/{} {:<10} {:>8.0} req/s  p50 {:>6} µs  p99 {:>6} µs{}{}",
                settings.runs,
                target.name(),
                result.per_second(),
                result.fired.latency.value_at_quantile(0.50),
                result.fired.latency.value_at_quantile(0.99),
                result
                    .all_written
                    .map(|at| format!("  all orders in DB at {:.0} ms", millis(at)))
                    .unwrap_or_default(),
                if result.ok() { "" } else { "  BROKEN" }
            );
            measured.push(result);
        }
    }
    print_report(&machine, settings, &measured, started.elapsed());
    Ok(())
}

/// The trivial endpoint, driven as the shop is.
async fn measure_trivial(
    trivial: &Trivial,
    settings: &Settings,
    run: usize,
) -> Result<Measured, String> {
    let base = trivial.url();
    let client = http_client(settings.concurrency)?;
    warm_up(&client, &base, settings.concurrency).await?;
    let fired = fire(
        &client,
        &format!("{base}/trivial"),
        settings.users,
        settings.concurrency,
    )
    .await?;
    let mut problems = Vec::new();
    let created = fired.statuses.get("201").copied().unwrap_or(0)
        + fired.statuses.get("202").copied().unwrap_or(0);
    if created != settings.users {
        problems.push(format!(
            "{created} answers 201 of {} ({})",
            settings.users,
            statuses_text(&fired.statuses)
        ));
    }
    Ok(Measured {
        target: Target::Trivial,
        run,
        fired,
        all_written: None,
        problems,
        found: None,
    })
}

/// One strategy: fresh Redis keyspace and database, one instance, a voucher, the sale.
async fn measure_shop(
    redis_url: &str,
    strategy: StrategyKind,
    settings: &Settings,
    run: usize,
) -> Result<Measured, String> {
    flush(redis_url).await?;
    let dir = tempfile::Builder::new()
        .prefix("seckill-bench-")
        .tempdir()
        .map_err(|error| format!("temp dir: {error}"))?;
    let database_url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
    let service = seckill::serve::start(ServiceConfig {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        redis: redlatch::Deployment::new(redlatch::Servers::Single(redis_url.to_owned())),
        database_url: database_url.clone(),
        strategy,
        instance: 1,
        lab_schema: false,
    })
    .await
    .map_err(|error| format!("{strategy}: the instance did not start: {error}"))?;
    let db = Db::connect(&database_url)
        .await
        .map_err(|error| format!("{strategy}: cannot open the database: {error}"));
    let outcome = match db {
        Ok(db) => {
            let outcome = sell(&service.url(), &db, strategy, settings, run).await;
            db.close().await;
            outcome
        }
        Err(error) => Err(error),
    };
    service.shutdown().await;
    drop(dir);
    outcome
}

/// Creates the voucher, fires the clicks while polling the database, verifies.
async fn sell(
    base: &str,
    db: &Db,
    strategy: StrategyKind,
    settings: &Settings,
    run: usize,
) -> Result<Measured, String> {
    let voucher = create_voucher(base, settings.stock).await?;
    let client = http_client(settings.concurrency)?;
    warm_up(&client, base, settings.concurrency).await?;

    let initial = i64::try_from(settings.stock).map_err(|_| "stock out of range")?;
    let expected = i64::try_from(settings.expected_orders()).map_err(|_| "users out of range")?;
    // Orders to wait for: a clean sale's, until the answers say how many were granted.
    let awaited = Arc::new(AtomicI64::new(expected));
    let poller = tokio::spawn(poll_until_written(
        db.clone(),
        voucher,
        initial,
        awaited.clone(),
    ));
    let fired = fire(
        &client,
        &format!("{base}/vouchers/{voucher}/orders"),
        settings.users,
        settings.concurrency,
    )
    .await;
    let fired = match fired {
        Ok(fired) => fired,
        Err(error) => {
            poller.abort();
            return Err(error);
        }
    };
    let granted = fired.statuses.get("201").copied().unwrap_or(0)
        + fired.statuses.get("202").copied().unwrap_or(0);
    awaited.store(
        i64::try_from(granted).unwrap_or(i64::MAX),
        Ordering::Relaxed,
    );
    let abort = poller.abort_handle();
    let written = match tokio::time::timeout(DRAIN_TIMEOUT, poller).await {
        Ok(Ok(Ok(at))) => Some(at.saturating_duration_since(fired.started)),
        Ok(Ok(Err(error))) => return Err(format!("{strategy}: polling the database: {error}")),
        Ok(Err(error)) => return Err(format!("{strategy}: the poller failed: {error}")),
        Err(_) => {
            abort.abort();
            None
        }
    };

    let mut problems = Vec::new();
    if written.is_none() {
        problems.push(format!(
            "the orders did not reach the database within {DRAIN_TIMEOUT:?} of the last answer"
        ));
    }
    let found = verify(db, voucher, settings, &fired, &mut problems).await?;
    Ok(Measured {
        target: Target::Shop(strategy),
        run,
        fired,
        all_written: written,
        problems,
        found: Some(found),
    })
}

/// Waits until the database stock has gone down by the awaited number of orders.
async fn poll_until_written(
    db: Db,
    voucher: i64,
    initial: i64,
    awaited: Arc<AtomicI64>,
) -> Result<Instant, String> {
    loop {
        let row = db
            .voucher(voucher)
            .await
            .map_err(|error| error.to_string())?
            .ok_or("the voucher is gone")?;
        if initial - row.stock >= awaited.load(Ordering::Relaxed) {
            return Ok(Instant::now());
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

/// What the database holds after the sale; appends every problem found.
/// Returns the number of orders and the remaining stock.
async fn verify(
    db: &Db,
    voucher: i64,
    settings: &Settings,
    fired: &Fired,
    problems: &mut Vec<String>,
) -> Result<(u64, i64), String> {
    let expected = settings.expected_orders();
    let initial = i64::try_from(settings.stock).unwrap_or(i64::MAX);
    let remaining = db
        .voucher(voucher)
        .await
        .map_err(|error| format!("reading the voucher: {error}"))?
        .ok_or("the voucher is gone")?
        .stock;
    let orders = db
        .orders(voucher)
        .await
        .map_err(|error| format!("reading the orders: {error}"))?;
    let count = orders.len() as u64;

    let unexpected: Vec<String> = fired
        .statuses
        .iter()
        .filter(|(status, _)| !matches!(status.as_str(), "201" | "202" | "410"))
        .map(|(status, n)| format!("{status} ×{n}"))
        .collect();
    if !unexpected.is_empty() {
        problems.push(format!("unexpected answers: {}", unexpected.join(", ")));
    }
    let granted = fired.statuses.get("201").copied().unwrap_or(0)
        + fired.statuses.get("202").copied().unwrap_or(0);
    if granted != expected {
        problems.push(format!("{granted} answers 201, expected {expected}"));
    }
    if count != expected {
        problems.push(format!(
            "{count} orders in the database, expected {expected}"
        ));
    }
    if i64::try_from(count).unwrap_or(i64::MAX) > initial || remaining < 0 {
        problems.push(format!(
            "OVERSOLD: {count} orders for a stock of {initial}, {remaining} left"
        ));
    }
    if initial - i64::try_from(count).unwrap_or(i64::MAX) != remaining {
        problems.push(format!(
            "stock {initial} − {count} orders ≠ {remaining} left"
        ));
    }
    let users: HashSet<i64> = orders.iter().map(|order| order.user_id).collect();
    if users.len() != orders.len() {
        problems.push(format!(
            "{} orders held by users with more than one",
            orders.len() - users.len()
        ));
    }
    let stored: HashSet<i64> = orders.iter().map(|order| order.id).collect();
    let missing = fired
        .granted_ids
        .iter()
        .filter(|id| !stored.contains(id))
        .count();
    if missing > 0 || fired.granted_without_id > 0 {
        problems.push(format!(
            "{missing} granted orders missing from the database, {} 201 answers without an order id",
            fired.granted_without_id
        ));
    }
    Ok((count, remaining))
}

/// What one pass of clicks got back.
struct Fired {
    started: Instant,
    requests: u64,
    /// First click → last answer.
    elapsed: Duration,
    /// Per request, µs.
    latency: Histogram<u64>,
    /// Answers per status code, "error" for transport failures.
    statuses: BTreeMap<String, u64>,
    granted_ids: Vec<i64>,
    granted_without_id: u64,
    /// First click → the last 201 answer.
    last_granted: Duration,
}

/// One worker's share.
struct Part {
    latency: Histogram<u64>,
    statuses: BTreeMap<String, u64>,
    granted_ids: Vec<i64>,
    granted_without_id: u64,
    last_granted: Duration,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// An HTTP client with room for `concurrency` pooled connections.
fn http_client(concurrency: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|error| format!("http client: {error}"))
}

/// Opens the pool's connections before the clock starts: `concurrency`
/// simultaneous `GET /health`, twice.
async fn warm_up(client: &reqwest::Client, base: &str, concurrency: usize) -> Result<(), String> {
    for _ in 0..2 {
        let mut probes = JoinSet::new();
        for _ in 0..concurrency {
            let (client, url) = (client.clone(), format!("{base}/health"));
            probes.spawn(async move {
                let response = client.get(&url).send().await?;
                let status = response.status();
                response.bytes().await?;
                Ok::<_, reqwest::Error>(status)
            });
        }
        while let Some(joined) = probes.join_next().await {
            match joined.map_err(|error| error.to_string())? {
                Ok(status) if status.is_success() => {}
                Ok(status) => return Err(format!("GET {base}/health answered {status}")),
                Err(error) => return Err(format!("GET {base}/health failed: {error}")),
            }
        }
    }
    Ok(())
}

/// Users 1..=`users` each POST once to `url`, `concurrency` requests in flight.
async fn fire(
    client: &reqwest::Client,
    url: &str,
    users: u64,
    concurrency: usize,
) -> Result<Fired, String> {
    let next = Arc::new(AtomicU64::new(1));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        workers.spawn(async move {
            let mut part = Part {
                latency: histogram(),
                statuses: BTreeMap::new(),
                granted_ids: Vec::new(),
                granted_without_id: 0,
                last_granted: Duration::ZERO,
            };
            loop {
                let user = next.fetch_add(1, Ordering::Relaxed);
                if user > users {
                    break;
                }
                click(&client, &url, user, started, &mut part).await;
            }
            part
        });
    }
    let mut fired = Fired {
        started,
        requests: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        statuses: BTreeMap::new(),
        granted_ids: Vec::new(),
        granted_without_id: 0,
        last_granted: Duration::ZERO,
    };
    while let Some(joined) = workers.join_next().await {
        let part = joined.map_err(|error| format!("a driver task failed: {error}"))?;
        fired
            .latency
            .add(&part.latency)
            .map_err(|error| error.to_string())?;
        for (status, n) in part.statuses {
            *fired.statuses.entry(status).or_default() += n;
            fired.requests += n;
        }
        fired.granted_ids.extend(part.granted_ids);
        fired.granted_without_id += part.granted_without_id;
        fired.last_granted = fired.last_granted.max(part.last_granted);
    }
    fired.elapsed = started.elapsed();
    Ok(fired)
}

/// One click: `POST url` with `X-User-Id`, body read.
async fn click(client: &reqwest::Client, url: &str, user: u64, started: Instant, part: &mut Part) {
    let sent = Instant::now();
    let answer = match client
        .post(url)
        .header("X-User-Id", user.to_string())
        .send()
        .await
    {
        Ok(response) => {
            let status = response.status().as_u16();
            response.bytes().await.map(|body| (status, body))
        }
        Err(error) => Err(error),
    };
    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
    part.latency.saturating_record(micros.max(1));
    let key = match &answer {
        Ok((status, _)) => status.to_string(),
        Err(_) => "error".to_owned(),
    };
    *part.statuses.entry(key).or_default() += 1;
    if let Ok((201 | 202, body)) = answer {
        part.last_granted = part.last_granted.max(started.elapsed());
        let id = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|value| value.get("order_id").and_then(Value::as_i64));
        match id {
            Some(id) => part.granted_ids.push(id),
            None => part.granted_without_id += 1,
        }
    }
}

/// `FLUSHDB`: no stock, buyer, stream entry or id counter of an earlier run.
async fn flush(redis_url: &str) -> Result<(), String> {
    let client = redis::Client::open(redis_url).map_err(|error| error.to_string())?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|error| format!("redis: {error}"))?;
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut conn)
        .await
        .map_err(|error| format!("FLUSHDB: {error}"))
}

/// `POST /vouchers`: `stock` units, open from a minute ago for an hour.
async fn create_voucher(base: &str, stock: u64) -> Result<i64, String> {
    let now = chrono::Utc::now();
    let body = json!({
        "title": "bench: grab",
        "stock": stock,
        "begin_at": (now - chrono::Duration::minutes(1)).to_rfc3339(),
        "end_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
    });
    let url = format!("{base}/vouchers");
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|error| error.to_string())?
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|error| format!("POST {url} failed: {error}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status != StatusCode::CREATED {
        return Err(format!("POST {url} answered {status}: {}", text.trim()));
    }
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|value| value.get("id").and_then(Value::as_i64))
        .ok_or_else(|| format!("POST {url}: no voucher id in {text}"))
}

/// CPUs, load, redis-server and rustc versions.
async fn machine_line(redis: &RedisServer) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let info: String = match redis.client().get_multiplexed_async_connection().await {
        Ok(mut conn) => redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
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
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned());
    format!(
        "Machine: nproc {cpus}, redis-server {redis_version} (local, same machine), {rustc}; \
         server runtimes {} Tokio workers each, client runtime {cpus}; load average at start {load}",
        server_workers()
    )
}

/// Median and range of one figure across runs.
struct Summary {
    median: f64,
    min: f64,
    max: f64,
}

impl Summary {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Some(Summary {
            median,
            min: values[0],
            max: values[n - 1],
        })
    }

    fn show(summary: Option<&Summary>, decimals: usize) -> String {
        match summary {
            None => "no clean run".to_owned(),
            Some(Summary { median, min, max }) => {
                let (median, min, max) = (
                    grouped(*median, decimals),
                    grouped(*min, decimals),
                    grouped(*max, decimals),
                );
                format!("{median} ({min}..{max})")
            }
        }
    }
}

/// `12345.6` → `12,346` (decimals 0) or `12,345.6`.
fn grouped(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(frac) => format!("{sign}{out}.{frac}"),
        None => format!("{sign}{out}"),
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn statuses_text(statuses: &BTreeMap<String, u64>) -> String {
    statuses
        .iter()
        .map(|(status, n)| format!("{status} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_report(machine: &str, settings: &Settings, measured: &[Measured], took: Duration) {
    println!("{machine}");
    println!("Command: `{}`", settings.command());
    println!(
        "Load: {} users × 1 click, {} requests in flight, one reqwest client; stock {}; \
         {} run(s) in {:.1} s; figures are median (min..max) over the clean runs\n",
        settings.users,
        settings.concurrency,
        settings.stock,
        settings.runs,
        took.as_secs_f64()
    );

    for result in measured.iter().filter(|result| !result.ok()) {
        println!(
            "WARNING: run {} {} is broken and left out of the figures: {}",
            result.run,
            result.target.name(),
            result.problems.join("; ")
        );
    }
    if measured.iter().any(|result| !result.ok()) {
        println!();
    }

    let clean = |target: Target| -> Vec<&Measured> {
        measured
            .iter()
            .filter(|result| result.target == target && result.ok())
            .collect()
    };

    println!("### Requests/s and latency, {} clicks\n", settings.users);
    println!(
        "| endpoint | answers per run | req/s | latency p50 (µs) | latency p99 (µs) | clean runs |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for target in Target::all() {
        let runs = clean(target);
        let answers = measured
            .iter()
            .find(|result| result.target == target)
            .map(|result| statuses_text(&result.fired.statuses))
            .unwrap_or_default();
        let rate = Summary::of(runs.iter().map(|result| result.per_second()));
        let p50 = Summary::of(
            runs.iter()
                .map(|result| result.fired.latency.value_at_quantile(0.50) as f64),
        );
        let p99 = Summary::of(
            runs.iter()
                .map(|result| result.fired.latency.value_at_quantile(0.99) as f64),
        );
        println!(
            "| {} | {answers} | {} | {} | {} | {}/{} |",
            target.label(),
            Summary::show(rate.as_ref(), 0),
            Summary::show(p50.as_ref(), 0),
            Summary::show(p99.as_ref(), 0),
            runs.len(),
            settings.runs
        );
    }
    println!();

    println!("### req/s against the trivial endpoint, same run\n");
    println!("| ratio | median (min..max) |");
    println!("|---|---:|");
    let mut reserve_ratio = None;
    for strategy in [StrategyKind::Reserve, StrategyKind::RedisLock] {
        let ratios = (1..=settings.runs).filter_map(|run| {
            let find = |target: Target| {
                measured
                    .iter()
                    .find(|result| result.run == run && result.target == target && result.ok())
            };
            let ours = find(Target::Shop(strategy))?;
            let trivial = find(Target::Trivial)?;
            Some(ours.per_second() / trivial.per_second())
        });
        let summary = Summary::of(ratios);
        println!(
            "| `{strategy}` / trivial | {} |",
            Summary::show(summary.as_ref(), 2)
        );
        if strategy == StrategyKind::Reserve {
            reserve_ratio = summary.map(|summary| summary.median);
        }
    }
    println!();
    match reserve_ratio {
        Some(ratio) if ratio >= GOAL_RATIO => {
            println!("Goal `reserve` ≥ {GOAL_RATIO}× trivial: met (median {ratio:.2}×)\n");
        }
        Some(ratio) => {
            println!("Goal `reserve` ≥ {GOAL_RATIO}× trivial: NOT met (median {ratio:.2}×)\n");
        }
        None => println!("Goal `reserve` ≥ {GOAL_RATIO}× trivial: no clean run to judge\n"),
    }

    println!(
        "### The sale in the database (poller every {} ms)\n",
        DRAIN_POLL.as_millis()
    );
    println!(
        "| strategy | last 201 answered (ms after the first click) | last answer (ms) | all orders in the database (ms) | drain after the last answer (ms) |"
    );
    println!("|---|---:|---:|---:|---:|");
    for strategy in STRATEGIES {
        let runs = clean(Target::Shop(strategy));
        let figure = |value: fn(&Measured) -> Option<f64>| {
            Summary::show(
                Summary::of(runs.iter().filter_map(|result| value(result))).as_ref(),
                0,
            )
        };
        println!(
            "| `{strategy}` | {} | {} | {} | {} |",
            figure(|result| Some(millis(result.fired.last_granted))),
            figure(|result| Some(millis(result.fired.elapsed))),
            figure(|result| result.all_written.map(millis)),
            figure(|result| result.drain().map(millis)),
        );
    }
    println!();

    println!("### Runs\n");
    println!(
        "| run | endpoint | req/s | p50 (µs) | p99 (µs) | max (µs) | orders / stock left | verdict |"
    );
    println!("|---:|---|---:|---:|---:|---:|---|---|");
    for result in measured {
        let found = result.found.map_or_else(
            || "–".to_owned(),
            |(orders, left)| format!("{orders} / {left}"),
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {found} | {} |",
            result.run,
            result.target.name(),
            grouped(result.per_second(), 0),
            result.fired.latency.value_at_quantile(0.50),
            result.fired.latency.value_at_quantile(0.99),
            result.fired.latency.max(),
            if result.ok() {
                "ok".to_owned()
            } else {
                format!("BROKEN: {}", result.problems.join("; "))
            }
        );
    }
}

//! `seckill demo`: every strategy, side by side, under the same flash sale.
//!
//! Needs nothing but `redis-server` on the PATH. It starts a private Redis,
//! and for each strategy of [`StrategyKind::ALL`]: a fresh SQLite database,
//! an emptied Redis, two in-process instances on free ports (the two
//! "tomcats" behind seed 004's nginx), a voucher with 100 in stock open now
//! for an hour, and [`crate::load`]'s 500 users × 3 simultaneous clicks over
//! both instances. Then it prints one table: sold/stock, unsold, `409
//! conflict` refusals, oversold, duplicate users, lost orders, success (201
//! over 201 + conflict), requests/s and p99 latency per strategy.
//!
//! Every strategy runs on the *lab schema* — no `UNIQUE(user_id, voucher_id)`,
//! no `CHECK (stock >= 0)` — so each row shows what the strategy alone
//! guarantees, and the comparison is fair.
//!
//! The exit status is 0 when the table tells the lesson ([`lesson`]):
//! `redis-lock` and `reserve` sell exactly min(stock, users), with nothing
//! oversold, duplicated or lost; `optimistic` and `early-release` never
//! oversell; `optimistic-version` and `optimistic-compare` neither oversell
//! nor duplicate.

mod keyspace;
mod scratch;
mod table;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::BoxError;
use crate::load::{LoadConfig, run_load};
use crate::serve::{Service, ServiceConfig};
use crate::strategy::StrategyKind;

pub use table::{DemoRow, Lesson, lesson, render, shows};

/// The sentence that says why every strategy runs without constraints.
pub const LAB_SCHEMA_NOTE: &str = "lab schema: no UNIQUE/CHECK constraints, so each strategy shows what it alone \
     guarantees (every strategy runs on it, so the comparison is fair)";

/// Instances per strategy: two, so that a lock inside one process is not enough.
const INSTANCES: u16 = 2;

/// Requests in flight at most: about 21 users clicking at once. Deeper
/// queues hide the cross-instance race rather than widen it: each instance
/// then reads the database when its own connection pool frees up, so a
/// user's two simultaneous clicks get processed far apart and the second
/// already sees the first one's order.
const DEMO_CONCURRENCY: u32 = 64;

/// How long the voucher stays open.
const SALE_WINDOW: Duration = Duration::from_secs(3600);

/// Arguments of `seckill demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Print the table as a JSON array (one object per strategy).
    #[arg(long)]
    pub json: bool,
    /// Use this Redis instead of a private redis-server. Its database (the
    /// URL's /N) is FLUSHed before each strategy: point it at a scratch one.
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// Where the per-strategy databases go (default: SQLite files in a
    /// temporary directory). sqlite:PREFIX makes PREFIX-STRATEGY.db files
    /// (replaced, then kept); postgres:// or mysql:// must be a scratch
    /// server: one database per strategy is created through the URL's
    /// database (seckill_demo_PID_STRATEGY) and dropped at the end.
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Buyers (seed 002's 500).
    #[arg(long, value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub users: u64,
    /// Simultaneous clicks per buyer.
    #[arg(long, value_name = "K", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub clicks: u32,
    /// Vouchers in stock (seed 002's 100).
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub stock: u64,
    /// Requests in flight at most (a user's clicks always go together).
    #[arg(long, value_name = "C", default_value_t = DEMO_CONCURRENCY,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: u32,
}

/// What [`run_demo`] runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// A Redis URL to use (and flush) instead of a private server.
    pub redis: Option<String>,
    /// Where the databases go; see [`DemoArgs::database`].
    pub database: Option<String>,
    pub users: u64,
    pub clicks: u32,
    pub stock: u64,
    /// Requests in flight at most (see [`LoadConfig::concurrency`]).
    pub concurrency: u32,
    /// The strategies to run, in order (the table's rows).
    pub strategies: Vec<StrategyKind>,
    /// Say on stderr which strategy is running.
    pub verbose: bool,
}

impl Default for DemoConfig {
    /// Seed 002's sale: 500 users, 3 clicks each, 100 in stock, every strategy.
    fn default() -> Self {
        Self {
            redis: None,
            database: None,
            users: 500,
            clicks: 3,
            stock: 100,
            concurrency: DEMO_CONCURRENCY,
            strategies: StrategyKind::ALL.to_vec(),
            verbose: false,
        }
    }
}

impl From<&DemoArgs> for DemoConfig {
    fn from(args: &DemoArgs) -> Self {
        Self {
            redis: args.redis.clone(),
            database: args.database.clone(),
            users: args.users,
            clicks: args.clicks,
            stock: args.stock,
            concurrency: args.concurrency,
            strategies: StrategyKind::ALL.to_vec(),
            verbose: !args.json,
        }
    }
}

/// `seckill demo`: runs every strategy, prints the table (or JSON), and
/// returns 0 when the table tells the lesson, 1 with the reason otherwise.
pub async fn run(args: DemoArgs) -> Result<u8, BoxError> {
    let config = DemoConfig::from(&args);
    let started = Instant::now();
    if !args.json {
        println!(
            "seckill demo: {} users x {} simultaneous clicks ({} requests in flight), {} in stock, \
             {INSTANCES} instances per strategy",
            config.users, config.clicks, config.concurrency, config.stock
        );
        println!("{LAB_SCHEMA_NOTE}");
    }
    let rows = run_demo(&config).await?;
    let verdict = lesson(&rows, config.stock, config.users, config.clicks);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!();
        println!("{}", render(&rows));
        for note in &verdict.notes {
            println!("note: {note}");
        }
        if verdict.failures.is_empty() {
            println!(
                "lesson holds: redis-lock and reserve sold exactly {} with nothing oversold, duplicated or lost ({:.1} s)",
                config.stock.min(config.users),
                started.elapsed().as_secs_f64()
            );
        }
    }
    for failure in &verdict.failures {
        eprintln!("seckill demo: the lesson does not hold: {failure}");
    }
    Ok(if verdict.failures.is_empty() { 0 } else { 1 })
}

/// Runs each strategy of `config` in turn and returns the table's rows.
///
/// Errors when Redis cannot be started or reached, a database cannot be
/// made, an instance does not start, or the load cannot run at all.
pub async fn run_demo(config: &DemoConfig) -> Result<Vec<DemoRow>, BoxError> {
    let keyspace = keyspace::Keyspace::open(config.redis.as_deref()).await?;
    let mut scratch = scratch::Scratch::new(config.database.as_deref())?;
    let mut rows = Vec::with_capacity(config.strategies.len());
    let mut outcome = Ok(());
    for &strategy in &config.strategies {
        let started = Instant::now();
        match run_strategy(config, strategy, &keyspace, &mut scratch).await {
            Ok(row) => {
                if config.verbose {
                    eprintln!("ran {strategy} in {:.1} s", started.elapsed().as_secs_f64());
                }
                rows.push(row);
            }
            Err(error) => {
                outcome = Err(format!("{strategy}: {error}").into());
                break;
            }
        }
    }
    scratch.cleanup().await;
    outcome.map(|()| rows)
}

/// One row: fresh stores, two instances, a voucher, the load.
async fn run_strategy(
    config: &DemoConfig,
    strategy: StrategyKind,
    keyspace: &keyspace::Keyspace,
    scratch: &mut scratch::Scratch,
) -> Result<DemoRow, BoxError> {
    keyspace.flush().await?;
    let database_url = scratch.fresh(&strategy.to_string()).await?;
    let mut services = Vec::with_capacity(usize::from(INSTANCES));
    // Started one after the other: the first one migrates the fresh database.
    for instance in 1..=INSTANCES {
        let service = crate::serve::start(ServiceConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            redis: redlatch::Deployment::new(redlatch::Servers::Single(keyspace.url().to_owned())),
            database_url: database_url.clone(),
            strategy,
            instance,
            lab_schema: true,
        })
        .await;
        match service {
            Ok(service) => services.push(service),
            Err(error) => {
                stop(services).await;
                return Err(format!("instance {instance} did not start: {error}").into());
            }
        }
    }
    let targets: Vec<String> = services
        .iter()
        .map(|service| format!("http://{}", service.addr()))
        .collect();
    let outcome = sell(config, &targets, &database_url, strategy).await;
    stop(services).await;
    outcome
}

async fn sell(
    config: &DemoConfig,
    targets: &[String],
    database_url: &str,
    strategy: StrategyKind,
) -> Result<DemoRow, BoxError> {
    let voucher = create_voucher(&targets[0], &format!("demo: {strategy}"), config.stock).await?;
    let mut load = LoadConfig::new(targets.to_vec(), voucher);
    load.users = config.users;
    load.clicks = config.clicks;
    load.concurrency = config.concurrency;
    load.database = Some(database_url.to_owned());
    let report = run_load(load).await?;
    Ok(DemoRow::new(strategy, &report))
}

async fn stop(services: Vec<Service>) {
    for service in services {
        service.shutdown().await;
    }
}

#[derive(Deserialize)]
struct Created {
    id: serde_json::Value,
}

/// `POST /vouchers`: `stock` units, open from a minute ago for an hour.
async fn create_voucher(base: &str, title: &str, stock: u64) -> Result<u64, BoxError> {
    let now = chrono::Utc::now();
    let window = chrono::Duration::from_std(SALE_WINDOW)?;
    let body = serde_json::json!({
        "title": title,
        "stock": stock,
        "begin_at": (now - chrono::Duration::minutes(1)).to_rfc3339(),
        "end_at": (now + window).to_rfc3339(),
    });
    let url = format!("{base}/vouchers");
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|error| format!("POST {url} failed: {error}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.as_u16() != 201 {
        return Err(format!("POST {url} answered {status}: {}", text.trim()).into());
    }
    let created: Created =
        serde_json::from_str(&text).map_err(|error| format!("POST {url}: {error}: {text}"))?;
    match &created.id {
        serde_json::Value::Number(number) => number.as_u64(),
        serde_json::Value::String(text) => text.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("POST {url}: the id {} is not a voucher id", created.id).into())
}

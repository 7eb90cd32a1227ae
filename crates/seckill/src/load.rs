//! `seckill load`: N users × K simultaneous duplicate clicks against one or
//! more instances, then a check of what the database holds.
//!
//! The load is seed 002's "500 buyers, 100 items" with seed 004's twist: a
//! user who clicks "grab" several times at once. Click `i` of user `u` goes to
//! target `((u - 1) * K + i) mod T`, so with two or more targets a user's
//! duplicate clicks land on *different* instances at the same moment — the
//! case that a lock inside one process cannot see.
//!
//! With `--mix pay=P,cancel=C,expire=E` each accepted order is followed
//! up by its buyer at once: paid, cancelled, or left to the service's
//! payment timeout, in those percentages ([`Mix`]). A `202` order is first
//! waited for in `GET /orders/{id}`. Cancelled and expired units go back on
//! sale, so users later in the run may buy them again.
//!
//! After the last answer, the orders are read back (from the database when
//! `--database` is given, else over HTTP), waiting for asynchronously written
//! orders to drain and, with `--expect-expiry-within D`, for the orders left
//! unpaid to expire. Then the violations are counted:
//!
//! - **oversold**: more units held by pending or paid orders than there
//!   were, or a negative stock;
//! - **duplicate users**: users with more than one order of the voucher
//!   (whatever became of them);
//! - **missing**: order ids answered with `201`/`202` that never reached the database;
//! - **stock not conserved**: stock + held units differ before and after;
//! - **wrong status**: an order whose final status is not what the load's
//!   answers say (paid after a `200` to pay, cancelled after a `200` to
//!   cancel, expired after a `409` or when left with `--expect-expiry-within`).
//!
//! [`run_load`] is the reusable core (the demo calls it); [`run`] is the
//! command, which prints the [`LoadReport`] and exits 1 on any violation.

mod fire;
mod follow_up;
mod identity;
mod mix;
mod outage;
mod report;
mod source;
mod verdict;

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use crate::BoxError;

pub use identity::Identity;
pub use mix::{Mix, MixError};
pub use outage::{Outage, OutageError};
pub use report::{LatencySummary, LoadReport};

/// Arguments of `seckill load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Base URL of an instance, e.g. http://127.0.0.1:8081 (repeat the option
    /// for several; a user's duplicate clicks go to different ones).
    #[arg(long = "target", value_name = "URL", required = true)]
    pub targets: Vec<String>,
    /// The voucher to order.
    #[arg(long, value_name = "ID")]
    pub voucher: u64,
    /// Number of users (ids 1..=N).
    #[arg(long, value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub users: u64,
    /// Simultaneous clicks per user (duplicates fired at the same moment).
    #[arg(long, value_name = "K", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clicks: u32,
    /// Verify against this database directly (the service's URL, e.g.
    /// sqlite:///tmp/shop.db); without it, verify through the HTTP endpoints.
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Print the report as JSON (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Requests in flight at most (raised to K so a user's clicks go together).
    #[arg(long, value_name = "C", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: u32,
    /// How long to wait for orders written asynchronously (the reserve
    /// strategy's stream consumer) to reach the database; also the longest
    /// wait for a `202` order to show before paying or cancelling it.
    #[arg(long, value_name = "DURATION", default_value = "15s",
          value_parser = humantime::parse_duration)]
    pub drain_timeout: Duration,
    /// What each buyer does with an accepted order, in percent summing to
    /// 100: pay it, cancel it, or leave it to expire (missing keys are 0).
    /// Without it: buy only.
    #[arg(long, value_name = "pay=P,cancel=C,expire=E")]
    pub mix: Option<Mix>,
    /// Wait up to D after the last answer for every order of the load to
    /// leave `pending` (the service's --payment-timeout plus a tenth, plus
    /// slack), and count an order left unpaid that did not expire as a
    /// violation. Without it, orders left unpaid may be pending or expired.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub expect_expiry_within: Option<Duration>,
    /// For services started with `--auth jwt`: sign each user's requests
    /// with a JWT (HS256, `sub` = the user id) made with this secret, the
    /// service's `--jwt-secret`. Without it, users send `X-User-Id`.
    #[arg(
        long,
        value_name = "S",
        env = "SECKILL_JWT_SECRET",
        hide_env_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub jwt_secret: Option<String>,
    /// A Redis fault during the run: `pause=D` (stalled for D, `DEBUG
    /// SLEEP`), `restart` (emptied and its connections dropped), `after=A`
    /// (when, after the first click); needs --outage-redis.
    #[arg(
        long,
        value_name = "pause=D,restart,after=A",
        requires = "outage_redis"
    )]
    pub outage: Option<Outage>,
    /// The shop's Redis, for --outage.
    #[arg(long, value_name = "URL", requires = "outage")]
    pub outage_redis: Option<String>,
}

/// What [`run_load`] does: the targets, the voucher, the shape of the load.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Base URLs of the instances (at least one).
    pub targets: Vec<String>,
    /// The voucher to order.
    pub voucher: u64,
    /// Users 1..=`users` each click.
    pub users: u64,
    /// Simultaneous clicks per user.
    pub clicks: u32,
    /// Verify against this database URL; `None`: through the first target's HTTP API.
    pub database: Option<String>,
    /// Requests in flight at most (raised to `clicks`).
    pub concurrency: u32,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Longest wait for asynchronously written orders (and for a `202`
    /// order to show before its follow-up).
    pub drain_timeout: Duration,
    /// Follow-ups on accepted orders; `None`: buy only.
    pub mix: Option<Mix>,
    /// Wait this long after the load for the orders to leave `pending`, and
    /// judge the ones left unpaid as expired; `None`: no wait.
    pub expect_expiry_within: Option<Duration>,
    /// How the users name themselves (`X-User-Id` unless a JWT secret is given).
    pub identity: Identity,
    /// A Redis fault during the run, and the shop's Redis URL; `None`: none.
    pub outage: Option<(Outage, String)>,
}

impl LoadConfig {
    /// The defaults of `seckill load`: 500 users × 3 clicks, 256 in flight,
    /// HTTP verification, no progress bar, 15 s drain timeout, buying only.
    pub fn new(targets: Vec<String>, voucher: u64) -> Self {
        Self {
            targets,
            voucher,
            users: 500,
            clicks: 3,
            database: None,
            concurrency: 256,
            progress: false,
            drain_timeout: Duration::from_secs(15),
            mix: None,
            expect_expiry_within: None,
            identity: Identity::Header,
            outage: None,
        }
    }
}

impl From<&LoadArgs> for LoadConfig {
    fn from(args: &LoadArgs) -> Self {
        Self {
            targets: args.targets.clone(),
            voucher: args.voucher,
            users: args.users,
            clicks: args.clicks,
            database: args.database.clone(),
            concurrency: args.concurrency,
            // A bar would garble JSON consumers' terminals and pipes alike.
            progress: !args.json && std::io::stderr().is_terminal(),
            drain_timeout: args.drain_timeout,
            mix: args.mix,
            expect_expiry_within: args.expect_expiry_within,
            identity: args
                .jwt_secret
                .as_deref()
                .map_or(Identity::Header, Identity::jwt),
            outage: args.outage.zip(args.outage_redis.clone()),
        }
    }
}

/// `seckill load`: runs the load, prints the report (text or JSON), and
/// returns exit status 0 when nothing was violated, 1 otherwise.
pub async fn run(args: LoadArgs) -> Result<u8, BoxError> {
    let report = run_load(LoadConfig::from(&args)).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(if report.ok { 0 } else { 1 })
}

/// Reads the voucher's stock, fires the clicks (and follow-ups), waits for
/// the orders to drain (and expire) and verifies them.
///
/// Errors when the configuration is unusable (no target, a bad URL, zero
/// users or clicks), a target does not answer before the load starts, or the
/// voucher cannot be read. Violations are not errors: they are in the report.
pub async fn run_load(config: LoadConfig) -> Result<LoadReport, BoxError> {
    let targets = fire::Targets::parse(&config.targets)?;
    if config.users == 0 || config.clicks == 0 {
        return Err("--users and --clicks must be at least 1".into());
    }
    let concurrency = config.concurrency.max(config.clicks).max(1);
    let client = fire::http_client(concurrency)?;
    let source = source::Source::open(config.database.as_deref(), &client, targets.first()).await?;

    let outcome = load_and_verify(&config, &targets, &client, &source, concurrency).await;
    source.close().await;
    outcome
}

/// The run proper, between opening and closing the verification source.
async fn load_and_verify(
    config: &LoadConfig,
    targets: &fire::Targets,
    client: &reqwest::Client,
    source: &source::Source,
    concurrency: u32,
) -> Result<LoadReport, BoxError> {
    let before = source.snapshot(config.voucher).await?;
    fire::warm_up(client, targets, concurrency).await?;

    let progress = report::progress_bar(
        config.progress,
        config.users.saturating_mul(u64::from(config.clicks)),
    );
    let shape = fire::Shape {
        voucher: config.voucher,
        users: config.users,
        clicks: config.clicks,
        concurrency,
        mix: config.mix.unwrap_or_default(),
        visible_within: config.drain_timeout,
    };
    let injected = match &config.outage {
        Some((outage, url)) => {
            let conn = outage::connect(url).await?;
            Some(tokio::spawn(outage::inject(conn, *outage, Instant::now())))
        }
        None => None,
    };
    let fired = fire::fire(client, targets, &shape, &config.identity, &progress).await?;
    let outage = match injected {
        Some(injected) => Some(injected.await.map_err(|error| error.to_string())??),
        None => None,
    };
    let load_ended = Instant::now();
    progress.set_message("waiting for the orders to drain");

    let expected = before.orders.len() + fired.accepted.len();
    let (_, drain) = source
        .drain(config.voucher, expected, config.drain_timeout)
        .await?;
    let mut expiry_wait = Duration::ZERO;
    if let Some(within) = config.expect_expiry_within {
        progress.set_message("waiting for unpaid orders to expire");
        let ids: Vec<String> = fired
            .accepted
            .iter()
            .map(|order| order.order_id.clone())
            .collect();
        let left = within.saturating_sub(load_ended.elapsed());
        expiry_wait = source.wait_until_ended(&ids, left).await?;
    }
    let after = source.snapshot(config.voucher).await?;
    progress.finish_and_clear();

    let verdict = verdict::judge(
        &before,
        &after,
        &fired.accepted,
        fired.accepted_without_id,
        config.expect_expiry_within.is_some(),
    );
    let mut report = LoadReport::new(
        config,
        targets,
        source.kind(),
        &fired,
        (&before, &after),
        (drain, expiry_wait),
        verdict,
    );
    report.outage = outage;
    Ok(report)
}

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

mod config;
mod fire;
mod follow_up;
mod identity;
mod mix;
mod outage;
mod report;
mod source;
mod verdict;

use std::time::{Duration, Instant};

use crate::BoxError;

pub use config::{LoadArgs, LoadConfig};
pub use identity::Identity;
pub use mix::{Mix, MixError};
pub use outage::{Outage, OutageError};
pub use report::{LatencySummary, LoadReport};
pub use verdict::Verdict;

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

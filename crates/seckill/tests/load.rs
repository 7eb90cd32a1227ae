//! `seckill load`, the binary, against in-process instances: its exit status
//! and its JSON report; with `--mix`, on every database backend (see
//! `service/support.rs`).

#[path = "load/shop.rs"]
mod shop;
// The backends and the per-test databases of the service tests.
#[allow(dead_code)]
#[path = "service/support.rs"]
mod support;

use std::process::Output;
use std::time::Duration;

use seckill::load::LoadReport;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use shop::{Shop, TestResult};
use support::TestDatabase;

/// Runs the built `seckill load` with `args`, off the runtime's threads.
async fn seckill_load(args: Vec<String>) -> TestResult<Output> {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .arg("load")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .await?;
    Ok(output)
}

fn load_args(targets: &[String], voucher: u64, users: u64, clicks: u32) -> Vec<String> {
    let mut args = Vec::new();
    for target in targets {
        args.push("--target".to_owned());
        args.push(target.clone());
    }
    args.extend([
        "--voucher".to_owned(),
        voucher.to_string(),
        "--users".to_owned(),
        users.to_string(),
        "--clicks".to_owned(),
        clicks.to_string(),
        "--json".to_owned(),
    ]);
    args
}

fn report_of(output: &Output) -> TestResult<LoadReport> {
    serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "stdout is not a load report ({error}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_sale_over_two_instances_is_clean_and_exits_0() -> TestResult {
    let shop = Shop::start(StrategyKind::RedisLock, 2, true).await?;
    let voucher = shop.create_voucher("load test", 40).await?;
    let mut args = load_args(&shop.targets(), voucher, 150, 3);
    args.extend(["--database".to_owned(), shop.database_url.clone()]);

    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.verified_via, "database");
    assert_eq!(report.targets.len(), 2);
    assert_eq!(report.requests, 450);
    assert_eq!(report.statuses.values().sum::<u64>(), 450);
    assert_eq!(
        report.statuses.get("201"),
        Some(&40),
        "{:?}",
        report.statuses
    );
    assert_eq!(report.accepted, 40);
    assert_eq!(report.verdict.initial_stock, 40);
    assert_eq!(
        (
            report.verdict.orders,
            report.verdict.new_orders,
            report.verdict.remaining_stock
        ),
        (40, 40, 0)
    );
    assert_eq!(
        (
            report.verdict.oversold,
            report.verdict.duplicate_users,
            report.verdict.missing
        ),
        (0, 0, 0)
    );
    assert!(
        report.verdict.violations.is_empty(),
        "{:?}",
        report.verdict.violations
    );
    assert!(report.requests_per_sec > 0.0);
    assert!(report.latency_us.p50 > 0 && report.latency_us.p50 <= report.latency_us.p99);
    assert!(report.latency_us.p99 <= report.latency_us.max);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_run_reports_every_answer_and_the_longest_wait() -> TestResult {
    let shop = Shop::start(StrategyKind::Reserve, 1, false).await?;
    let voucher = shop.create_voucher("outage", 100).await?;
    let mut args = load_args(&shop.targets(), voucher, 300, 1);
    args.extend([
        "--database".to_owned(),
        shop.database_url.clone(),
        "--outage".to_owned(),
        "pause=6s".to_owned(),
        "--outage-redis".to_owned(),
        shop.redis_url(),
    ]);
    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    let outage = report.outage.clone().unwrap_or_default();
    assert!(outage.starts_with("pause=6s"), "{report:#?}");
    assert_eq!(report.statuses.values().sum::<u64>(), 300);
    // Redis stalled longer than the shop's 3 s response timeout: the
    // clicks caught in it are answered 503, none waits for the stall's end.
    assert!(report.statuses.contains_key("503"), "{:?}", report.statuses);
    assert_eq!(
        report.errors.get("redis_unavailable"),
        report.statuses.get("503")
    );
    assert!(
        report.latency_us.max < 6_000_000,
        "longest wait {} µs: past the stall",
        report.latency_us.max
    );
    assert_eq!(
        (report.verdict.oversold, report.verdict.duplicate_users),
        (0, 0)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_database_the_check_reads_the_http_api() -> TestResult {
    let shop = Shop::start(StrategyKind::RedisLock, 2, true).await?;
    let voucher = shop.create_voucher("http check", 10).await?;

    let output = seckill_load(load_args(&shop.targets(), voucher, 30, 2)).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert_eq!(report.verified_via, "http");
    assert_eq!(
        (
            report.verdict.orders,
            report.verdict.oversold,
            report.verdict.duplicate_users,
            report.verdict.missing
        ),
        (10, 0, 0, 0)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_sale_is_caught_and_exits_1() -> TestResult {
    let shop = Shop::start(StrategyKind::Naive, 2, true).await?;
    let voucher = shop.create_voucher("naive", 40).await?;
    let mut args = load_args(&shop.targets(), voucher, 150, 3);
    args.extend(["--database".to_owned(), shop.database_url.clone()]);

    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    assert_eq!(output.status.code(), Some(1), "{report:#?}");
    assert!(!report.ok);
    // Naive has no per-user check at all: a user's simultaneous clicks
    // become several orders, and the unguarded decrement oversells.
    assert!(report.verdict.duplicate_users > 0, "{report:#?}");
    assert!(report.verdict.oversold > 0, "{report:#?}");
    assert!(!report.verdict.violations.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_report_names_the_verdict() -> TestResult {
    let shop = Shop::start(StrategyKind::RedisLock, 1, false).await?;
    let voucher = shop.create_voucher("text", 5).await?;
    let mut args = load_args(&shop.targets(), voucher, 10, 2);
    args.retain(|arg| arg != "--json");

    let output = seckill_load(args).await?;
    shop.stop().await;

    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("10 users x 2 simultaneous clicks = 20 requests"),
        "{text}"
    );
    assert!(
        text.contains("oversold 0, duplicate users 0, accepted but missing 0"),
        "{text}"
    );
    assert!(text.contains("OK: nothing oversold"), "{text}");
    Ok(())
}

#[tokio::test]
async fn an_unreachable_target_is_an_error_not_a_report() -> TestResult {
    // Port 9 on loopback (discard) has no listener here.
    let output = seckill_load(load_args(&["http://127.0.0.1:9".to_owned()], 1, 1, 1)).await?;
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "no report on stdout");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn a_bad_target_url_is_refused() -> TestResult {
    let output = seckill_load(load_args(&["not a url".to_owned()], 1, 1, 1)).await?;
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a URL"), "{stderr}");
    Ok(())
}

/// The service's payment timeout in the mixed runs: long enough for a pay
/// or cancel right after the order, short enough to wait for.
const PAYMENT_TIMEOUT: Duration = Duration::from_secs(2);

fn count(map: &std::collections::BTreeMap<String, u64>, key: &str) -> u64 {
    map.get(key).copied().unwrap_or(0)
}

/// 60 users x 2 clicks for 20 units on two instances, a few users at a
/// time so that units given back by cancels are bought again by later
/// users; half the orders paid, a quarter cancelled, a quarter left to
/// expire, and the load waits for them to.
async fn mixed_run(strategy: StrategyKind, database: TestDatabase) {
    let tuning = Tuning {
        payment_timeout: PAYMENT_TIMEOUT,
        ..Tuning::default()
    };
    let shop = Shop::start_with(strategy, 2, false, database.url.clone(), tuning)
        .await
        .expect("shop starts");
    let voucher = shop.create_voucher("mix", 20).await.expect("voucher");
    let mut args = load_args(&shop.targets(), voucher, 60, 2);
    args.extend(
        [
            "--database",
            &database.url,
            "--mix",
            "pay=50,cancel=25,expire=25",
            "--expect-expiry-within",
            "15s",
            "--concurrency",
            "8",
        ]
        .map(str::to_owned),
    );

    let output = seckill_load(args).await.expect("seckill load runs");
    let report = report_of(&output).expect("a report");
    shop.stop().await;

    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert!(
        report.ok && report.verdict.violations.is_empty(),
        "{report:#?}"
    );
    assert_eq!(report.mix, "pay=50,cancel=25,expire=25");
    let (paid, cancelled, expired, pending) = (
        count(&report.final_statuses, "paid"),
        count(&report.final_statuses, "cancelled"),
        count(&report.final_statuses, "expired"),
        count(&report.final_statuses, "pending"),
    );
    let conflicts = count(&report.pay_answers, "409") + count(&report.cancel_answers, "409");
    assert_eq!(paid, count(&report.pay_answers, "200"), "{report:#?}");
    assert_eq!(
        cancelled,
        count(&report.cancel_answers, "200"),
        "{report:#?}"
    );
    assert_eq!(expired, report.left_to_expire + conflicts, "{report:#?}");
    assert_eq!(pending, 0, "every order left unpaid expired: {report:#?}");
    assert!(paid > 0 && cancelled > 0 && expired > 0, "{report:#?}");
    // Units given back by cancels went to later users.
    assert!(
        report.accepted > report.verdict.initial_stock as u64,
        "{report:#?}"
    );
    assert_eq!(report.verdict.orders, report.accepted);
    assert_eq!(paid + cancelled + expired, report.verdict.orders);
    // Stock conserved: what is not paid is back in stock.
    assert_eq!(report.verdict.initial_stock, 20);
    assert_eq!(report.verdict.holding, paid as i64);
    assert_eq!(
        report.verdict.remaining_stock,
        20 - paid as i64,
        "{report:#?}"
    );
    assert_eq!(
        (
            report.verdict.oversold,
            report.verdict.duplicate_users,
            report.verdict.missing,
            report.verdict.wrong_status,
            report.verdict.stock_drift
        ),
        (0, 0, 0, 0, 0)
    );
    let pay = report.pay_latency_us.expect("pay latency");
    let cancel = report.cancel_latency_us.expect("cancel latency");
    assert!(pay.p50 > 0 && pay.p50 <= pay.p99 && pay.p99 <= pay.max);
    assert!(cancel.p50 > 0 && cancel.p50 <= cancel.p99);
}

async fn mixed_run_on_redis_lock(database: TestDatabase) {
    mixed_run(StrategyKind::RedisLock, database).await;
}
on_every_backend!(mixed_run_on_redis_lock);

async fn mixed_run_on_reserve(database: TestDatabase) {
    mixed_run(StrategyKind::Reserve, database).await;
}
on_every_backend!(mixed_run_on_reserve);

/// A payment timeout far shorter than the run and no wait for the
/// expiries: the sweepers may still be ending orders while the check reads
/// them, and the load ends in a clean report, exit 0. (The check under
/// changes that never pause, which made it exit 1 without a report, is
/// `load::source`'s unit test; this run is the command end to end.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_expiring_while_the_check_reads_still_give_a_report() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
    let tuning = Tuning {
        payment_timeout: Duration::from_millis(200),
        ..Tuning::default()
    };
    let shop = Shop::start_with(StrategyKind::RedisLock, 2, false, url.clone(), tuning).await?;
    let voucher = shop.create_voucher("short timeout", 100).await?;
    let mut args = load_args(&shop.targets(), voucher, 600, 1);
    args.extend(
        [
            "--database",
            &url,
            "--mix",
            "pay=10,cancel=0,expire=90",
            "--concurrency",
            "4",
        ]
        .map(str::to_owned),
    );

    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert!(
        report.ok && report.verdict.violations.is_empty(),
        "{report:#?}"
    );
    // Units came back during the run and were sold again.
    assert!(report.accepted > 100, "{report:#?}");
    assert_eq!(
        report.verdict.remaining_stock + report.verdict.holding,
        100,
        "stock + held units of one moment: {report:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_waiting_for_expiry_left_orders_are_still_pending_over_http() -> TestResult {
    let shop = Shop::start(StrategyKind::Reserve, 2, false).await?;
    let voucher = shop.create_voucher("mix over http", 12).await?;
    let mut args = load_args(&shop.targets(), voucher, 30, 2);
    args.extend(["--mix", "pay=40,cancel=40,expire=20"].map(str::to_owned));
    args.retain(|arg| arg != "--json");

    let output = seckill_load(args.clone()).await?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("follow-ups (pay=40,cancel=40,expire=20): pay 200 x"),
        "{text}"
    );
    assert!(text.contains("wrong final status 0"), "{text}");
    assert!(text.contains("stock drift 0"), "{text}");

    // The same voucher again, as JSON: the first run's orders are "before".
    args.push("--json".to_owned());
    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;

    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert_eq!(report.verified_via, "http");
    assert!(report.orders_before > 0);
    // The 15-minute default timeout: nothing expired, left orders wait.
    assert_eq!(count(&report.final_statuses, "expired"), 0);
    assert!(count(&report.final_statuses, "pending") >= report.left_to_expire);
    assert_eq!(
        report.verdict.remaining_stock + report.verdict.holding,
        12,
        "stock + held units stay the voucher's 12: {report:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_mix_that_does_not_sum_to_100_is_refused() -> TestResult {
    let mut args = load_args(&["http://127.0.0.1:9".to_owned()], 1, 1, 1);
    args.extend(["--mix", "pay=60,cancel=30"].map(str::to_owned));
    let output = seckill_load(args).await?;
    assert_eq!(output.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("sum to 90"), "{stderr}");
    Ok(())
}

/// Against a service that takes signed users only, the load signs each
/// user's clicks and follow-ups with the service's secret; without the
/// secret every click is refused, the `X-User-Id` header is not trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_jwt_secret_the_load_buys_and_pays_as_signed_users() -> TestResult {
    const SECRET: &str = "load-test-secret, 32 bytes or more";
    let dir = tempfile::tempdir()?;
    let database_url = format!("sqlite://{}?mode=rwc", dir.path().join("shop.db").display());
    let tuning = Tuning {
        auth: seckill::api::auth::AuthConfig::Jwt {
            secret: SECRET.to_owned(),
        },
        ..Tuning::default()
    };
    let shop = Shop::start_with(StrategyKind::RedisLock, 2, false, database_url, tuning).await?;
    let voucher = shop.create_voucher("signed users", 10).await?;

    let unsigned = seckill_load(load_args(&shop.targets(), voucher, 5, 1)).await?;
    let unsigned = report_of(&unsigned)?;
    assert_eq!(unsigned.statuses.get("401"), Some(&5), "{unsigned:#?}");
    assert_eq!(unsigned.accepted, 0);

    let mut args = load_args(&shop.targets(), voucher, 30, 2);
    args.extend([
        "--database".to_owned(),
        shop.database_url.clone(),
        "--jwt-secret".to_owned(),
        SECRET.to_owned(),
        "--mix".to_owned(),
        "pay=100,cancel=0,expire=0".to_owned(),
    ]);
    let output = seckill_load(args).await?;
    let report = report_of(&output)?;
    shop.stop().await;
    assert_eq!(output.status.code(), Some(0), "{report:#?}");
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.accepted, 10, "{report:#?}");
    assert_eq!(report.pay_answers.get("200"), Some(&10), "{report:#?}");
    assert_eq!(report.final_statuses.get("paid"), Some(&10), "{report:#?}");
    assert!(
        !report.statuses.contains_key("401"),
        "{:?}",
        report.statuses
    );
    Ok(())
}

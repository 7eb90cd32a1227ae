//! `seckill load`, the binary, against in-process instances: its exit status
//! and its JSON report.

#[path = "load/shop.rs"]
mod shop;

use std::process::Output;

use seckill::load::LoadReport;
use seckill::strategy::StrategyKind;
use shop::{Shop, TestResult};

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
    assert_eq!(report.initial_stock, 40);
    assert_eq!(
        (report.orders, report.new_orders, report.remaining_stock),
        (40, 40, 0)
    );
    assert_eq!(
        (report.oversold, report.duplicate_users, report.missing),
        (0, 0, 0)
    );
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(report.requests_per_sec > 0.0);
    assert!(report.latency_us.p50 > 0 && report.latency_us.p50 <= report.latency_us.p99);
    assert!(report.latency_us.p99 <= report.latency_us.max);
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
            report.orders,
            report.oversold,
            report.duplicate_users,
            report.missing
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
    assert!(report.duplicate_users > 0, "{report:#?}");
    assert!(report.oversold > 0, "{report:#?}");
    assert!(!report.violations.is_empty());
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

//! The operator's documents match the code: every series the Grafana
//! dashboard queries and every name in docs/METRICS.md is one the library or
//! the shop records, every recorded series is documented, and a running shop
//! exports the series an order touches.

use std::collections::BTreeSet;

use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::Value;

use crate::support::{
    Backend, TestDatabase, click, client, create_voucher, metrics_page, open_window,
    redis_and_instances,
};

fn doc(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// Every name the code records.
fn recorded() -> BTreeSet<&'static str> {
    redlatch::metrics::ALL
        .into_iter()
        .chain(seckill::metrics::ALL)
        .collect()
}

/// The metric names in `text`: words starting `redlatch_` or `seckill_`,
/// with a summary's `_sum` / `_count` suffix taken off.
fn names_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("redlatch_") || word.starts_with("seckill_"))
        .map(|word| {
            word.strip_suffix("_sum")
                .or_else(|| word.strip_suffix("_count"))
                .unwrap_or(word)
                .to_owned()
        })
        .collect()
}

#[test]
fn the_dashboard_queries_only_series_the_code_records() {
    let dashboard: Value = serde_json::from_str(&doc("docs/grafana/redlatch.json")).expect("JSON");
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target| target["expr"].as_str().expect("expr").to_owned())
        .collect();
    assert!(exprs.len() >= 9, "{exprs:?}");
    let queried: BTreeSet<String> = exprs.iter().flat_map(|expr| names_in(expr)).collect();
    let recorded = recorded();
    let unknown: Vec<&String> = queried
        .iter()
        .filter(|name| !recorded.contains(name.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries unknown series {unknown:?}"
    );
    // And it shows every series there is.
    let unshown: Vec<&&str> = recorded
        .iter()
        .filter(|name| !queried.contains(**name))
        .collect();
    assert!(unshown.is_empty(), "not on the dashboard: {unshown:?}");
}

#[test]
fn metrics_md_names_exactly_the_series_the_code_records() {
    let documented = names_in(&doc("docs/METRICS.md"));
    let recorded: BTreeSet<String> = recorded().into_iter().map(str::to_owned).collect();
    assert_eq!(documented, recorded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_shop_exports_the_series_an_order_touches() {
    let database = TestDatabase::create(Backend::Sqlite, "dashboards")
        .await
        .expect("SQLite");
    let (_redis, services) =
        redis_and_instances(&database, StrategyKind::RedisLock, 1, Tuning::default()).await;
    let base = services[0].url();
    let http = client();
    let voucher = create_voucher(&http, &base, 1, open_window()).await;
    assert_eq!(click(&http, &base, voucher, 1).await.status, Some(201));
    assert_eq!(click(&http, &base, voucher, 2).await.status, Some(410));
    let page = metrics_page(&http, &base).await;
    for name in [
        redlatch::metrics::ACQUIRE_SECONDS,
        redlatch::metrics::ACQUISITIONS,
        seckill::metrics::ORDERS_CREATED,
        seckill::metrics::ORDER_REJECTIONS,
        seckill::metrics::ORDER_SECONDS,
    ] {
        assert!(page.contains(name), "{name} missing from /metrics:\n{page}");
    }
    let exported = names_in(&page);
    let recorded = recorded();
    let unknown: Vec<&String> = exported
        .iter()
        .filter(|name| !recorded.contains(name.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "/metrics exports undocumented series {unknown:?}"
    );
}

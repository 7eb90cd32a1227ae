//! The shop on every deployment `seckill serve` takes: two instances sell
//! exactly the stock on a 3-master Redis Cluster and on a Sentinel group
//! (SQLite; the backends are covered on one server by `sell_out`), and
//! Redlock masters are refused at start with the reason.

use redlatch::{Deployment, Servers};
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use testkit::{Cluster, MASTER_NAME, SentinelGroup};

use crate::sell_out::sell_out_on;
use crate::support::{Backend, TestDatabase};

async fn sqlite(test: &str) -> TestDatabase {
    TestDatabase::create(Backend::Sqlite, test)
        .await
        .expect("SQLite is always available")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_strategies_sell_exactly_the_stock_on_a_cluster() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    let redis = Deployment::new(Servers::Cluster(cluster.urls()));
    sell_out_on(
        &redis,
        sqlite("cluster_lock").await,
        StrategyKind::RedisLock,
    )
    .await;
    sell_out_on(
        &redis,
        sqlite("cluster_reserve").await,
        StrategyKind::Reserve,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_strategies_sell_exactly_the_stock_through_sentinel() {
    let group = SentinelGroup::start(1).expect("sentinel group");
    let redis = Deployment::new(Servers::Sentinel {
        sentinels: group.sentinel_urls(),
        master: MASTER_NAME.to_owned(),
    });
    sell_out_on(
        &redis,
        sqlite("sentinel_lock").await,
        StrategyKind::RedisLock,
    )
    .await;
    sell_out_on(
        &redis,
        sqlite("sentinel_reserve").await,
        StrategyKind::Reserve,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_masters_are_refused_with_the_reason() {
    let database = sqlite("redlock_refused").await;
    let redis = Deployment::new(Servers::Redlock(vec![
        Servers::Single("redis://127.0.0.1:1".to_owned()),
        Servers::Single("redis://127.0.0.1:2".to_owned()),
        Servers::Single("redis://127.0.0.1:3".to_owned()),
    ]));
    let mut config = crate::support::config("", &database.url, StrategyKind::RedisLock, 1, false);
    config.redis = redis;
    let refused = seckill::serve::start_tuned(config, Tuning::default()).await;
    let Err(error) = refused else {
        panic!("Redlock masters must be refused");
    };
    let error = error.to_string();
    assert!(error.contains("Redlock masters"), "{error}");
}

/// `seckill serve` names each deployment with the same flags as `redlatch`,
/// or with the same `[redis]` section in its settings file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seckill_serve_takes_the_cluster_and_sentinel_flags() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    let group = SentinelGroup::start(1).expect("sentinel group");
    let mut sentinel_flags: Vec<String> = group
        .sentinel_urls()
        .into_iter()
        .flat_map(|url| ["--sentinel".to_owned(), url])
        .collect();
    sentinel_flags.extend(["--sentinel-master".to_owned(), MASTER_NAME.to_owned()]);
    let cluster_flags = vec!["--redis-cluster".to_owned(), cluster.urls()[0].clone()];
    // The same deployment named by the settings file's [redis] section.
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = dir.path().join("redlatch.toml");
    std::fs::write(
        &settings,
        format!(
            "[redis]\nmode = \"cluster\"\nurls = [\"{}\"]\n",
            cluster.urls()[0]
        ),
    )
    .expect("settings file");
    let file_flags = vec!["--lock-config".to_owned(), settings.display().to_string()];
    for (what, flags) in [
        ("cluster", cluster_flags),
        ("sentinel", sentinel_flags),
        ("settings file", file_flags),
    ] {
        let database = sqlite(&format!("serve_{}", what.replace(' ', "_"))).await;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
            .arg("serve")
            .args(&flags)
            .args(["--listen", "127.0.0.1:0", "--database", &database.url])
            .env_remove("REDIS_URL")
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("seckill serve");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        let base = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("stderr line") {
                if let Some(rest) = line.split(" serving on ").nth(1) {
                    return rest.split(' ').next().map(str::to_owned);
                }
            }
            None
        })
        .await
        .expect("serve started in time")
        .unwrap_or_else(|| panic!("{what}: seckill serve never said where it serves"));
        let http = crate::support::client();
        let voucher =
            crate::support::create_voucher(&http, &base, 1, crate::support::open_window()).await;
        let first = crate::support::click(&http, &base, voucher, 7).await;
        let second = crate::support::click(&http, &base, voucher, 8).await;
        assert_eq!(
            (first.status, second.status),
            (Some(201), Some(410)),
            "{what}"
        );
        if what == "settings file" {
            // The order's id was drawn in the cluster, not in a default Redis.
            let day = seckill::id_worker::day_key(chrono::Utc::now());
            let port = cluster.master_of(&day).expect("slot owner");
            let node = cluster
                .nodes()
                .iter()
                .find(|node| node.port() == port)
                .expect("node");
            let drawn: Option<i64> = redis::cmd("GET")
                .arg(&day)
                .query(&mut node.conn())
                .expect("GET");
            assert!(drawn.is_some_and(|n| n >= 1), "no id drawn in the cluster");
        }
        child.kill().await.expect("stop seckill serve");
    }
}

//! The flash sale itself: 500 users × 3 concurrent clicks on 100 units, over
//! two instances sharing one Redis and one database, ends with exactly 100
//! orders for 100 different users and no stock left, for the strategies that
//! claim to be correct across instances.

use std::time::{Duration, Instant};

use seckill::db::Db;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;

use crate::on_every_backend;
use crate::support::{
    Click, TestDatabase, assert_sold_out_exactly, click_storm, client, create_voucher, open_window,
    start_instances_on, tally,
};

const USERS: i64 = 500;
const CLICKS_PER_USER: usize = 3;
const STOCK: i64 = 100;
const IN_FLIGHT: usize = 128;

on_every_backend!(redis_lock_sells_exactly_the_stock_over_two_instances);
on_every_backend!(reserve_sells_exactly_the_stock_over_two_instances);

async fn redis_lock_sells_exactly_the_stock_over_two_instances(database: TestDatabase) {
    sell_out(database, StrategyKind::RedisLock).await;
}

async fn reserve_sells_exactly_the_stock_over_two_instances(database: TestDatabase) {
    sell_out(database, StrategyKind::Reserve).await;
}

async fn sell_out(database: TestDatabase, strategy: StrategyKind) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let single = redlatch::Deployment::new(redlatch::Servers::Single(redis.url()));
    sell_out_on(&single, database, strategy).await;
}

/// The sale over two instances on `redis`, any deployment.
pub async fn sell_out_on(
    redis: &redlatch::Deployment,
    database: TestDatabase,
    strategy: StrategyKind,
) {
    let services = start_instances_on(redis, &database.url, strategy, 2, Tuning::default()).await;
    let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
    let http = client();
    let voucher = create_voucher(&http, &bases[0], STOCK, open_window()).await;

    let started = Instant::now();
    let clicks = click_storm(&http, &bases, voucher, USERS, CLICKS_PER_USER, IN_FLIGHT).await;
    let took = started.elapsed();
    let statuses = tally(&clicks);
    eprintln!(
        "{strategy} on {:?}: {} clicks in {:.2} s: {statuses:?}",
        database.backend,
        clicks.len(),
        took.as_secs_f64()
    );
    // redis-lock writes the order (201); reserve accepts it for writing (202).
    let accepted_status = if strategy == StrategyKind::Reserve {
        202
    } else {
        201
    };
    assert_eq!(
        statuses.get(&accepted_status).copied().unwrap_or(0),
        STOCK as usize,
        "{statuses:?}"
    );
    for click in &clicks {
        let answer = click.body["error"].as_str().unwrap_or_default();
        match click.status {
            Some(status) if status == accepted_status => {}
            Some(409) if answer == "already_ordered" => {}
            // redis-lock: the user's other click holds the lock right now.
            Some(409) if strategy == StrategyKind::RedisLock => assert_eq!(answer, "in_progress"),
            Some(410) => assert_eq!(answer, "sold_out"),
            // A user's later click may wait out the lock while the first
            // one's transaction queues behind others.
            Some(503) if strategy == StrategyKind::RedisLock => assert_eq!(answer, "busy"),
            _ => panic!("unexpected answer {click:?}"),
        }
    }

    if strategy == StrategyKind::Reserve {
        wait_until_persisted(&database.url, voucher, &clicks).await;
    }
    assert_sold_out_exactly(&database.url, voucher, STOCK, &clicks).await;
    for service in services {
        service.shutdown().await;
    }
}

/// Waits (up to 20 s) until every accepted order is in the database.
async fn wait_until_persisted(database_url: &str, voucher: i64, clicks: &[Click]) {
    let accepted = clicks.iter().filter_map(Click::order_id).count();
    let db = Db::connect(database_url).await.expect("database");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let persisted = db.orders(voucher).await.expect("orders").len();
        if persisted >= accepted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {persisted} of {accepted} accepted orders reached the database"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    db.close().await;
}

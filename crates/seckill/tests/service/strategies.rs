//! Every strategy, one instance at a time, on the normal schema: the sale
//! window (403 not_started / ended), then order, second order (409), sold
//! out (410), and the order in the database. Then the lab strategies'
//! lessons over two instances on the lab schema: the optimistic locks
//! refuse buyers with stock left, and a lock released before the commit
//! lets a user buy twice.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use seckill::db::Db;
use seckill::serve::{Service, Tuning};
use seckill::strategy::StrategyKind;
use serde_json::json;

use crate::on_every_backend;
use crate::support::{
    TestDatabase, click, click_storm, client, config, create_voucher, open_window, start_instances,
    stock_of,
};

on_every_backend!(every_strategy_keeps_the_window_and_the_rules);

async fn every_strategy_keeps_the_window_and_the_rules(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    let db = Db::connect(&database.url).await.expect("database");
    for (round, strategy) in StrategyKind::ALL.into_iter().enumerate() {
        let mut services =
            start_instances(&redis.url(), &database.url, strategy, 1, Tuning::default()).await;
        let service = services.remove(0);
        let base = service.url();
        let now = Utc::now();
        let hour = chrono::Duration::hours(1);

        let upcoming = create_voucher(&http, &base, 5, (now + hour, now + hour * 2)).await;
        let answer = click(&http, &base, upcoming, 1).await;
        assert_eq!(answer.status, Some(403), "{strategy}: {answer:?}");
        assert_eq!(answer.body, json!({"error": "not_started"}), "{strategy}");

        let over = create_voucher(&http, &base, 5, (now - hour * 2, now - hour)).await;
        let answer = click(&http, &base, over, 1).await;
        assert_eq!(answer.status, Some(403), "{strategy}: {answer:?}");
        assert_eq!(answer.body, json!({"error": "ended"}), "{strategy}");

        // Two units: the stock check comes first (as in the seed), so a
        // user's second click sees already_ordered only while stock is left.
        let voucher = create_voucher(&http, &base, 2, open_window()).await;
        let user = 100 + round as i64;
        let accepted = if strategy == StrategyKind::Reserve {
            Some(202)
        } else {
            Some(201)
        };
        let first = click(&http, &base, voucher, user).await;
        assert_eq!(first.status, accepted, "{strategy}: {first:?}");
        assert_eq!(first.body["status"], "pending", "{strategy}: {first:?}");
        let order_id = first.order_id().expect("order id");
        let again = click(&http, &base, voucher, user).await;
        assert_eq!(
            again.status,
            Some(StatusCode::CONFLICT.as_u16()),
            "{strategy}: {again:?}"
        );
        assert_eq!(again.body["error"], "already_ordered", "{strategy}");
        let second_buyer = click(&http, &base, voucher, user + 1000).await;
        assert_eq!(
            second_buyer.status, accepted,
            "{strategy}: {second_buyer:?}"
        );
        let other = click(&http, &base, voucher, user + 2000).await;
        assert_eq!(
            other.status,
            Some(StatusCode::GONE.as_u16()),
            "{strategy}: {other:?}"
        );
        assert_eq!(other.body["error"], "sold_out", "{strategy}");

        // The reserve strategy writes the order asynchronously.
        let mut orders = Vec::new();
        for _ in 0..100 {
            orders = db.orders(voucher).await.expect("orders");
            if orders.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(orders.len(), 2, "{strategy}");
        assert_eq!(
            (orders[0].id, orders[0].user_id),
            (order_id, user),
            "{strategy}"
        );
        let stock = stock_of(&db, voucher).await;
        assert_eq!(stock, 0, "{strategy}");
        service.shutdown().await;
    }
    db.close().await;
}

/// Starts two instances of `strategy` on the lab schema (no UNIQUE, no
/// CHECK), so what the strategy alone guarantees shows in the data.
async fn start_lab_pair(
    redis: &testkit::RedisServer,
    database: &TestDatabase,
    strategy: StrategyKind,
) -> Vec<Service> {
    let starts = (1..=2).map(|instance| {
        seckill::serve::start_tuned(
            config(&redis.url(), &database.url, strategy, instance, true),
            Tuning::default(),
        )
    });
    futures_util::future::join_all(starts)
        .await
        .into_iter()
        .map(|started| started.expect("instance starts"))
        .collect()
}

/// The voucher's stock left and its orders per user.
async fn stock_and_orders_per_user(
    database: &TestDatabase,
    voucher: i64,
) -> (i64, BTreeMap<i64, usize>) {
    let db = Db::connect(&database.url).await.expect("database");
    let stock = stock_of(&db, voucher).await;
    let mut per_user = BTreeMap::new();
    for order in db.orders(voucher).await.expect("orders") {
        *per_user.entry(order.user_id).or_default() += 1;
    }
    db.close().await;
    (stock, per_user)
}

on_every_backend!(optimistic_locks_never_oversell_but_refuse_buyers_with_stock_left);

/// Seed §2.1, plan 1, and the version column: as many units as buyers, one
/// click each, all at once over two instances. Every buyer could have had
/// one; the compare-and-set lets one of each group that read the same
/// stock (or version) through and refuses the rest with 409 conflict, so
/// exactly the refused buyers' units stay unsold — and none is oversold.
async fn optimistic_locks_never_oversell_but_refuse_buyers_with_stock_left(database: TestDatabase) {
    const BUYERS: i64 = 30;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    for strategy in [
        StrategyKind::OptimisticVersion,
        StrategyKind::OptimisticCompare,
    ] {
        let services = start_lab_pair(&redis, &database, strategy).await;
        let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
        let voucher = create_voucher(&http, &bases[0], BUYERS, open_window()).await;
        let clicks = click_storm(&http, &bases, voucher, BUYERS, 1, BUYERS as usize).await;
        let mut sold = 0;
        let mut conflicts = 0;
        for click in &clicks {
            match (click.status, click.body["error"].as_str()) {
                (Some(201), _) => sold += 1,
                (Some(409), Some("conflict")) => conflicts += 1,
                _ => panic!("{strategy}: unexpected answer {click:?}"),
            }
        }
        let (stock, per_user) = stock_and_orders_per_user(&database, voucher).await;
        eprintln!(
            "{strategy} on {:?}: {sold} sold, {conflicts} refused with stock left",
            database.backend
        );
        assert_eq!(per_user.len() as i64, sold, "{strategy}: one order per 201");
        assert!(per_user.values().all(|&orders| orders == 1), "{strategy}");
        assert_eq!(stock, BUYERS - sold, "{strategy}: never oversold");
        assert_eq!(
            stock, conflicts,
            "{strategy}: each refusal left a unit unsold"
        );
        assert!(
            conflicts > 0,
            "{strategy}: simultaneous buyers read the same stock, so some must be refused"
        );
        for service in services {
            service.shutdown().await;
        }
    }
}

on_every_backend!(early_release_lets_a_users_second_click_buy_again);

/// Seed §3's bug with §4's lock: released before the commit, the redlatch
/// lock lets a user's click on the other instance in while the first
/// order is still uncommitted, so users end with two orders (lab schema);
/// the stock holds. The same clicks with `redis-lock` (commit, then
/// release) leave one order per user.
async fn early_release_lets_a_users_second_click_buy_again(database: TestDatabase) {
    const USERS: i64 = 20;
    const STOCK: i64 = 100;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    for strategy in [StrategyKind::EarlyRelease, StrategyKind::RedisLock] {
        let services = start_lab_pair(&redis, &database, strategy).await;
        let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
        let voucher = create_voucher(&http, &bases[0], STOCK, open_window()).await;
        // Two clicks per user, one on each instance, all at once.
        let clicks = click_storm(&http, &bases, voucher, USERS, 2, 2 * USERS as usize).await;
        let accepted = clicks
            .iter()
            .filter(|click| click.status == Some(201))
            .count();
        for click in &clicks {
            match (click.status, click.body["error"].as_str()) {
                (Some(201), _) | (Some(409), Some("already_ordered")) => {}
                // redis-lock does not wait: the user's other click holds the lock.
                (Some(409), Some("in_progress")) if strategy == StrategyKind::RedisLock => {}
                _ => panic!("{strategy}: unexpected answer {click:?}"),
            }
        }
        let (stock, per_user) = stock_and_orders_per_user(&database, voucher).await;
        let orders: usize = per_user.values().sum();
        let duplicated = per_user.values().filter(|&&orders| orders > 1).count();
        eprintln!(
            "{strategy} on {:?}: {orders} orders, {duplicated} of {USERS} users hold two",
            database.backend
        );
        assert_eq!(orders, accepted, "{strategy}: one order per 201");
        assert_eq!(stock, STOCK - orders as i64, "{strategy}: never oversold");
        assert_eq!(
            per_user.len() as i64,
            USERS,
            "{strategy}: every user bought"
        );
        if strategy == StrategyKind::EarlyRelease {
            assert!(
                duplicated > 0,
                "released before the commit, the lock must let a second click buy again"
            );
        } else {
            assert_eq!(duplicated, 0, "redis-lock commits before it releases");
        }
        for service in services {
            service.shutdown().await;
        }
    }
}

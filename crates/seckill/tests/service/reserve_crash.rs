//! The reserve strategy loses no accepted order when an instance dies: its
//! unacknowledged stream entries are claimed and written by the survivor.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use seckill::db::Db;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use seckill::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM};

use crate::on_every_backend;
use crate::support::{
    Backend, Click, TestDatabase, click_storm, client, create_voucher, on_backend, open_window,
    start_instances, tally,
};

const STOCK: i64 = 100;

/// Short, so the survivor takes over within the test's patience.
fn quick_claims() -> Tuning {
    Tuning {
        claim_idle: Duration::from_millis(300),
        ..Tuning::default()
    }
}

on_every_backend!(reserve_loses_no_accepted_order_when_an_instance_crashes);

async fn reserve_loses_no_accepted_order_when_an_instance_crashes(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let mut services = start_instances(
        &redis.url(),
        &database.url,
        StrategyKind::Reserve,
        2,
        quick_claims(),
    )
    .await;
    let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
    let http = client();
    let voucher = create_voucher(&http, &bases[1], STOCK, open_window()).await;

    let storm = {
        let http = http.clone();
        let bases = bases.clone();
        tokio::spawn(async move { click_storm(&http, &bases, voucher, 500, 3, 64).await })
    };
    // Crash instance 1 once some reservations are in the stream.
    let mut conn = redis.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let queued: i64 = redis::cmd("XLEN")
            .arg(ORDERS_STREAM)
            .query(&mut conn)
            .expect("XLEN");
        if queued >= 20 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    services.remove(0).abort();
    let orphaned = pending_of(&mut conn, "instance-1");
    let clicks = storm.await.expect("storm");
    eprintln!(
        "reserve crash on {:?}: {:?}; instance-1 died with {orphaned} entries pending",
        database.backend,
        tally(&clicks)
    );
    for click in &clicks {
        // A request in flight on the dying instance may see its Redis
        // connection go first: 503 redis_unavailable, or no answer at all.
        let dying_answer = click.base == bases[0]
            && click.status == Some(503)
            && click.body["error"] == "redis_unavailable";
        assert!(
            matches!(click.status, None | Some(202 | 409 | 410)) || dying_answer,
            "unexpected answer {click:?}"
        );
    }

    let db = Db::connect(&database.url).await.expect("database");
    let deadline = Instant::now() + Duration::from_secs(20);
    let reserved: usize = loop {
        let reserved: usize = redis::cmd("XLEN")
            .arg(ORDERS_STREAM)
            .query(&mut conn)
            .expect("XLEN");
        let pending: (usize, redis::Value, redis::Value, redis::Value) = redis::cmd("XPENDING")
            .arg(ORDERS_STREAM)
            .arg(CONSUMER_GROUP)
            .query(&mut conn)
            .expect("XPENDING");
        let persisted = db.orders(voucher).await.expect("orders").len();
        if persisted == reserved && pending.0 == 0 {
            break reserved;
        }
        assert!(
            Instant::now() < deadline,
            "{persisted} of {reserved} reservations persisted, {} pending",
            pending.0
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let orders = db.orders(voucher).await.expect("orders");
    let stock = db
        .voucher(voucher)
        .await
        .expect("voucher")
        .expect("exists")
        .stock;
    db.close().await;
    let order_ids: HashSet<i64> = orders.iter().map(|order| order.id).collect();
    let users: HashSet<i64> = orders.iter().map(|order| order.user_id).collect();
    let accepted: Vec<i64> = clicks.iter().filter_map(Click::order_id).collect();
    for order_id in &accepted {
        assert!(
            order_ids.contains(order_id),
            "accepted order {order_id} was lost"
        );
    }
    assert_eq!(orders.len(), reserved, "every reservation persisted");
    assert_eq!(users.len(), orders.len(), "one order per user");
    assert!(orders.len() as i64 <= STOCK, "never oversold");
    assert_eq!(
        stock + orders.len() as i64,
        STOCK,
        "database stock matches the orders"
    );
    let redis_stock: i64 = redis::cmd("GET")
        .arg(seckill::strategy::reserve::stock_key(voucher))
        .query(&mut conn)
        .expect("GET stock");
    assert_eq!(redis_stock, stock, "Redis and database agree once drained");
    for service in services {
        service.shutdown().await;
    }
}

/// Deterministic version of the crash: a consumer that read entries and
/// vanished (`instance-9`, never started) holds them pending; the running
/// instance claims them after the idle time and writes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_consumers_pending_orders_are_claimed() {
    on_backend(
        Backend::Sqlite,
        "dead_consumer_claim",
        |database| async move {
            let redis = testkit::RedisServer::start().expect("redis-server");
            let services = start_instances(
                &redis.url(),
                &database.url,
                StrategyKind::Reserve,
                1,
                quick_claims(),
            )
            .await;
            let http = client();
            let voucher = create_voucher(&http, &services[0].url(), 10, open_window()).await;

            let mut conn = redis.conn();
            let now_ms = chrono::Utc::now().timestamp_millis();
            let mut pipe = redis::pipe();
            pipe.atomic();
            for user in 1..=3i64 {
                pipe.cmd("XADD")
                    .arg(ORDERS_STREAM)
                    .arg("*")
                    .arg("order_id")
                    .arg(1_000 + user)
                    .arg("user_id")
                    .arg(user)
                    .arg("voucher_id")
                    .arg(voucher)
                    .arg("created_at")
                    .arg(now_ms)
                    .ignore();
            }
            // In the same transaction, so the live consumer cannot read them first.
            pipe.cmd("XREADGROUP")
                .arg("GROUP")
                .arg(CONSUMER_GROUP)
                .arg("instance-9")
                .arg("COUNT")
                .arg(10)
                .arg("STREAMS")
                .arg(ORDERS_STREAM)
                .arg(">")
                .ignore();
            let () = pipe.query(&mut conn).expect("MULTI");
            let pending_of_dead: usize = pending_of(&mut conn, "instance-9");
            assert_eq!(pending_of_dead, 3, "the dead consumer holds the entries");

            let db = Db::connect(&database.url).await.expect("database");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let orders = db.orders(voucher).await.expect("orders");
                if orders.len() == 3 && pending_of(&mut conn, "instance-9") == 0 {
                    let ids: Vec<i64> = orders.iter().map(|order| order.id).collect();
                    assert_eq!(ids, vec![1_001, 1_002, 1_003]);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "claimed orders not written: {orders:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let stock = db
                .voucher(voucher)
                .await
                .expect("voucher")
                .expect("exists")
                .stock;
            assert_eq!(stock, 7);
            db.close().await;
            let metrics = http
                .get(format!("{}/metrics", services[0].url()))
                .send()
                .await
                .expect("metrics")
                .text()
                .await
                .expect("text");
            assert!(
                metrics.contains("seckill_reserve_claimed_total"),
                "{metrics}"
            );
            for service in services {
                service.shutdown().await;
            }
        },
    )
    .await;
}

/// Entries pending for `consumer` in the group.
fn pending_of(conn: &mut redis::Connection, consumer: &str) -> usize {
    let entries: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .arg("-")
        .arg("+")
        .arg(100)
        .arg(consumer)
        .query(conn)
        .expect("XPENDING");
    entries.len()
}

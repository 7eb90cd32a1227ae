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
    start_instances, stock_of, tally,
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
        // What Redis took from the stock: the stream may be trimmed.
        let redis_stock: i64 = redis::cmd("GET")
            .arg(seckill::strategy::reserve::stock_key(voucher))
            .query(&mut conn)
            .expect("GET stock");
        let reserved = (STOCK - redis_stock) as usize;
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
    let stock = stock_of(&db, voucher).await;
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
            let stock = stock_of(&db, voucher).await;
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

on_every_backend!(an_instance_aborted_mid_batch_leaves_every_accepted_order_written_once);

/// An instance dies in the middle of a batch: some of the batch's orders are
/// in the database, none acknowledged. The next instance claims the batch
/// and writes the rest; every accepted order ends in the database exactly
/// once and the stock adds up.
async fn an_instance_aborted_mid_batch_leaves_every_accepted_order_written_once(
    database: TestDatabase,
) {
    const SALE: i64 = 40;
    let redis = testkit::RedisServer::start().expect("redis-server");
    // The fault: a slow database for instance 1 (50 ms per entry written),
    // so its batches take long and the crash lands inside one.
    let slow = Tuning {
        consumer_write_delay: Duration::from_millis(50),
        ..quick_claims()
    };
    let first = start_instances(&redis.url(), &database.url, StrategyKind::Reserve, 1, slow)
        .await
        .remove(0);
    let http = client();
    let voucher = create_voucher(&http, &first.url(), SALE, open_window()).await;
    let clicks = click_storm(&http, &[first.url()], voucher, 60, 1, 16).await;
    let accepted: Vec<i64> = clicks
        .iter()
        .filter(|click| matches!(click.status, Some(201 | 202)))
        .map(|click| click.body["order_id"].as_i64().expect("order_id"))
        .collect();
    assert_eq!(accepted.len() as i64, SALE, "{:?}", tally(&clicks));

    // Abort once the batch in hand has orders written but not acknowledged,
    // and at least three still to write (150 ms before its XACK).
    let mut conn = redis.conn();
    let db = Db::connect(&database.url).await.expect("database");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let written: HashSet<i64> = db
            .orders(voucher)
            .await
            .expect("orders")
            .iter()
            .map(|order| order.id)
            .collect();
        let held = pending_orders_of(&mut conn, "instance-1");
        let unacknowledged_written = held.iter().filter(|id| written.contains(id)).count();
        if unacknowledged_written >= 1 && held.len() - unacknowledged_written >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never caught a batch half written: {} written, {} held",
            written.len(),
            held.len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.abort();
    let written: HashSet<i64> = db
        .orders(voucher)
        .await
        .expect("orders")
        .iter()
        .map(|order| order.id)
        .collect();
    let held = pending_orders_of(&mut conn, "instance-1");
    let half_done = held.iter().filter(|id| written.contains(id)).count();
    eprintln!(
        "aborted mid-batch on {:?}: {} of {SALE} written, {} held unacknowledged, {half_done} of them written",
        database.backend,
        written.len(),
        held.len()
    );
    assert!(half_done >= 1, "the crash landed inside a batch");
    assert!(written.len() < accepted.len(), "orders were left to write");

    // The second instance claims the dead one's batch and finishes it.
    let second = seckill::serve::start_tuned(
        crate::support::config(&redis.url(), &database.url, StrategyKind::Reserve, 2, false),
        quick_claims(),
    )
    .await
    .expect("second instance");
    let deadline = Instant::now() + Duration::from_secs(20);
    let orders = loop {
        let orders = db.orders(voucher).await.expect("orders");
        if orders.len() == accepted.len() && pending_orders_of(&mut conn, "instance-1").is_empty() {
            break orders;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} accepted orders written",
            orders.len(),
            accepted.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stock = stock_of(&db, voucher).await;
    db.close().await;
    let mut ids: Vec<i64> = orders.iter().map(|order| order.id).collect();
    let mut expected = accepted.clone();
    ids.sort_unstable();
    expected.sort_unstable();
    assert_eq!(ids, expected, "every accepted order, each once");
    assert_eq!(stock, 0, "database stock: {SALE} sold");
    let redis_stock: i64 = redis::cmd("GET")
        .arg(seckill::strategy::reserve::stock_key(voucher))
        .query(&mut conn)
        .expect("GET stock");
    assert_eq!(redis_stock, 0);
    let dead: u64 = redis::cmd("XLEN")
        .arg(seckill::reserve_consumer::dead_letter::DEAD_STREAM)
        .query(&mut conn)
        .expect("XLEN");
    assert_eq!(dead, 0, "nothing dead-lettered");
    second.shutdown().await;
}

/// The order ids of the entries pending for `consumer`.
fn pending_orders_of(conn: &mut redis::Connection, consumer: &str) -> Vec<i64> {
    let entries: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .arg("-")
        .arg("+")
        .arg(1000)
        .arg(consumer)
        .query(conn)
        .expect("XPENDING");
    entries
        .iter()
        .filter_map(|(id, ..)| {
            let range: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(ORDERS_STREAM)
                .arg(id)
                .arg(id)
                .query(conn)
                .ok()?;
            range.ids.first()?.get::<i64>("order_id")
        })
        .collect()
}

//! The order lifecycle: pay, cancel, expire, and the unit that goes back
//! on sale exactly once, on every strategy that keeps the rules.

use std::time::Duration;

use seckill::db::Db;
use seckill::db::OrderStatus;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::Value;
use sqlx::Executor;

use crate::on_every_backend;
use crate::support::{
    TestDatabase, click, client, create_voucher, open_window, redis_and_instance, start_instances,
};

on_every_backend!(an_order_is_paid_or_cancelled_once_by_its_buyer);
on_every_backend!(pay_and_cancel_racing_on_two_instances_end_each_order_once);
on_every_backend!(unpaid_orders_expire_and_their_units_sell_again);
on_every_backend!(a_give_back_cut_short_by_a_crash_is_finished_once);

/// `POST /orders/{id}/{action}` as `user`: status and body.
pub async fn order_action(
    http: &reqwest::Client,
    base: &str,
    order_id: i64,
    action: &str,
    user: i64,
) -> (u16, Value) {
    let response = http
        .post(format!("{base}/orders/{order_id}/{action}"))
        .header("X-User-Id", user.to_string())
        .send()
        .await
        .expect("order action answered");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET /orders/{id}`: status and body.
pub async fn get_order(http: &reqwest::Client, base: &str, order_id: i64) -> (u16, Value) {
    let response = http
        .get(format!("{base}/orders/{order_id}"))
        .send()
        .await
        .expect("order answered");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Polls `GET /orders/{id}` until `done(order)` (a `reserve` order appears
/// once written; an order expires once the sweeper passes); panics after
/// a generous 30 s.
pub async fn wait_for_order(
    http: &reqwest::Client,
    base: &str,
    order_id: i64,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get_order(http, base, order_id).await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "order {order_id} never got there: last {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn voucher_stock(http: &reqwest::Client, base: &str, voucher: i64) -> i64 {
    let body: Value = http
        .get(format!("{base}/vouchers/{voucher}"))
        .send()
        .await
        .expect("voucher")
        .json()
        .await
        .expect("voucher JSON");
    body["stock"].as_i64().expect("stock")
}

async fn an_order_is_paid_or_cancelled_once_by_its_buyer(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    for (round, strategy) in [StrategyKind::RedisLock, StrategyKind::Reserve]
        .into_iter()
        .enumerate()
    {
        let instances =
            start_instances(&redis.url(), &database.url, strategy, 1, Tuning::default()).await;
        let base = instances[0].url();
        let http = client();
        let voucher = create_voucher(&http, &base, 2, open_window()).await;
        let users = 10 * round as i64;
        let (payer, canceller, latecomer, stranger) = (users + 1, users + 2, users + 3, users + 4);

        let placed = click(&http, &base, voucher, payer).await;
        let paid_id = placed.order_id().expect("order placed");
        let order = wait_for_order(&http, &base, paid_id, |_| true).await;
        assert_eq!(order["status"], "pending", "{strategy}: {order}");
        assert_eq!(order["user_id"], payer);
        assert_eq!(order["voucher_id"], voucher);
        assert!(
            order["created_at"]
                .as_str()
                .is_some_and(|at| at.ends_with('Z'))
        );

        let (status, body) = order_action(&http, &base, paid_id, "pay", stranger).await;
        assert_eq!(
            (status, &body["error"]),
            (403, &"forbidden".into()),
            "{body}"
        );
        let (status, body) = order_action(&http, &base, paid_id, "pay", payer).await;
        assert_eq!((status, &body["status"]), (200, &"paid".into()), "{body}");
        for action in ["pay", "cancel"] {
            let (status, body) = order_action(&http, &base, paid_id, action, payer).await;
            assert_eq!(
                (status, &body["error"]),
                (409, &"not_pending".into()),
                "{body}"
            );
        }

        let cancelled_id = click(&http, &base, voucher, canceller)
            .await
            .order_id()
            .expect("second order");
        wait_for_order(&http, &base, cancelled_id, |_| true).await;
        assert_eq!(voucher_stock(&http, &base, voucher).await, 0);
        let (status, body) = order_action(&http, &base, cancelled_id, "cancel", canceller).await;
        assert_eq!(
            (status, &body["status"]),
            (200, &"cancelled".into()),
            "{body}"
        );
        assert_eq!(
            voucher_stock(&http, &base, voucher).await,
            1,
            "{strategy}: the cancelled unit is back"
        );
        // It sells again (reserve: from the Redis stock it went back to),
        // and only once.
        let again = click(&http, &base, voucher, latecomer).await;
        assert!(again.order_id().is_some(), "{strategy}: {:?}", again.body);
        let sold_out = click(&http, &base, voucher, stranger).await;
        assert_eq!(
            sold_out.status,
            Some(410),
            "{strategy}: {:?}",
            sold_out.body
        );
        // The canceller's one order of the voucher is used.
        let twice = click(&http, &base, voucher, canceller).await;
        assert!(matches!(twice.status, Some(409 | 410)), "{:?}", twice.body);

        for path in ["/orders/999999", "/orders/abc", "/orders/1/refund"] {
            let response = http
                .get(format!("{base}{path}"))
                .send()
                .await
                .expect("answer");
            assert_eq!(response.status().as_u16(), 404, "{path}");
        }
        for instance in instances {
            instance.shutdown().await;
        }
    }
}

async fn pay_and_cancel_racing_on_two_instances_end_each_order_once(database: TestDatabase) {
    const ORDERS: i64 = 30;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let instances = start_instances(
        &redis.url(),
        &database.url,
        StrategyKind::RedisLock,
        2,
        Tuning::default(),
    )
    .await;
    let bases: Vec<String> = instances.iter().map(|instance| instance.url()).collect();
    let http = client();
    let voucher = create_voucher(&http, &bases[0], ORDERS + 5, open_window()).await;
    let mut ids = Vec::new();
    for user in 1..=ORDERS {
        let placed = click(&http, &bases[(user % 2) as usize], voucher, user).await;
        ids.push((user, placed.order_id().expect("order placed")));
    }
    // Each order: a payment on one instance and a cancel on the other, at once.
    let races = ids.iter().map(|&(user, id)| {
        let http = http.clone();
        let (pay_base, cancel_base) = (bases[0].clone(), bases[1].clone());
        async move {
            let (paid, cancelled) = tokio::join!(
                order_action(&http, &pay_base, id, "pay", user),
                order_action(&http, &cancel_base, id, "cancel", user),
            );
            (paid.0, cancelled.0)
        }
    });
    let outcomes = futures_util::future::join_all(races).await;
    let mut paid = 0;
    for (pay, cancel) in &outcomes {
        match (pay, cancel) {
            (200, 409) => paid += 1,
            (409, 200) => {}
            other => panic!("one of pay and cancel must win, the other see not_pending: {other:?}"),
        }
    }
    let db = Db::connect(&database.url).await.expect("db");
    let counts = db.count_by_status(voucher).await.expect("counts");
    let count = |status| {
        counts
            .iter()
            .find(|(found, _)| *found == status)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count(OrderStatus::Paid), paid);
    assert_eq!(count(OrderStatus::Cancelled), ORDERS - paid);
    assert_eq!(count(OrderStatus::Pending), 0);
    assert_eq!(
        voucher_stock(&http, &bases[0], voucher).await,
        5 + (ORDERS - paid),
        "each cancelled unit came back once ({paid} paid)"
    );
    db.close().await;
    for instance in instances {
        instance.shutdown().await;
    }
}

async fn unpaid_orders_expire_and_their_units_sell_again(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    for (round, strategy) in [StrategyKind::RedisLock, StrategyKind::Reserve]
        .into_iter()
        .enumerate()
    {
        let tuning = Tuning {
            payment_timeout: Duration::from_millis(300),
            ..Tuning::default()
        };
        let instances = start_instances(&redis.url(), &database.url, strategy, 1, tuning).await;
        let base = instances[0].url();
        let http = client();
        let voucher = create_voucher(&http, &base, 1, open_window()).await;
        let (first, second) = (100 * (round as i64 + 1), 100 * (round as i64 + 1) + 1);
        let id = click(&http, &base, voucher, first)
            .await
            .order_id()
            .expect("order placed");
        let sold_out = click(&http, &base, voucher, second).await;
        assert_eq!(
            sold_out.status,
            Some(410),
            "{strategy}: {:?}",
            sold_out.body
        );
        let expired = wait_for_order(&http, &base, id, |order| order["status"] != "pending").await;
        assert_eq!(expired["status"], "expired", "{strategy}: {expired}");
        let (status, body) = order_action(&http, &base, id, "pay", first).await;
        assert_eq!(
            (status, &body["error"]),
            (409, &"not_pending".into()),
            "{body}"
        );
        // The status changes first; with reserve, the Redis stock gets the
        // unit a moment later (after the commit), so a click may still
        // find it sold out for that moment.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let resold = click(&http, &base, voucher, second).await;
            if resold.order_id().is_some() {
                break;
            }
            assert_eq!(resold.status, Some(410), "{strategy}: {:?}", resold.body);
            assert!(
                tokio::time::Instant::now() < deadline,
                "{strategy}: the unit never sold again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for instance in instances {
            instance.shutdown().await;
        }
    }
}

/// The Redis half of a give-back, cut short by a crash after the database
/// commit, is finished by the sweeper, and a give-back already done is not
/// done again.
async fn a_give_back_cut_short_by_a_crash_is_finished_once(database: TestDatabase) {
    let tuning = Tuning {
        payment_timeout: Duration::from_millis(200),
        ..Tuning::default()
    };
    let (redis, service) = redis_and_instance(&database, StrategyKind::Reserve, tuning).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 3, open_window()).await;
    let id = click(&http, &base, voucher, 1)
        .await
        .order_id()
        .expect("order placed");
    wait_for_order(&http, &base, id, |_| true).await;
    let (status, _) = order_action(&http, &base, id, "cancel", 1).await;
    assert_eq!(status, 200);
    let stock_key = seckill::strategy::reserve::stock_key(voucher);
    let returned_key = seckill::lifecycle::redis_stock::returned_key(voucher);
    let mut conn = redis.conn();
    let redis_stock = |conn: &mut redis::Connection| -> i64 {
        redis::cmd("GET").arg(&stock_key).query(conn).expect("GET")
    };
    assert_eq!(redis_stock(&mut conn), 3, "the unit is back in Redis");

    let pool = sqlx::AnyPool::connect(&database.url).await.expect("pool");
    let not_back = format!("UPDATE voucher_order SET stock_back = 0 WHERE id = {id}");
    let stock_back = format!("SELECT stock_back FROM voucher_order WHERE id = {id}");
    let wait_back = async |pool: &sqlx::AnyPool| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let back: i64 = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(stock_back.clone()))
                .fetch_one(pool)
                .await
                .unwrap_or(0);
            if back == 1 {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "never marked back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // A crash between the commit and the script: Redis never got the unit.
    let _: () = redis::pipe()
        .cmd("SREM")
        .arg(&returned_key)
        .arg(id)
        .ignore()
        .cmd("DECR")
        .arg(&stock_key)
        .ignore()
        .query(&mut conn)
        .expect("undo the give-back");
    pool.execute(sqlx::AssertSqlSafe(not_back.clone()))
        .await
        .expect("mark not back");
    wait_back(&pool).await;
    assert_eq!(redis_stock(&mut conn), 3, "the sweeper gave it back");

    // A crash between the script and recording it: Redis has the unit.
    pool.execute(sqlx::AssertSqlSafe(not_back))
        .await
        .expect("mark not back");
    wait_back(&pool).await;
    assert_eq!(redis_stock(&mut conn), 3, "and not twice");
    pool.close().await;
    service.shutdown().await;
}

on_every_backend!(a_payment_after_the_deadline_expires_the_order);

/// The sweeper has not come by yet, but the deadline has passed: the
/// payment is refused and the order expires, its unit back on sale.
async fn a_payment_after_the_deadline_expires_the_order(database: TestDatabase) {
    // An hour: the sweeper looks every 5 s, so the payment comes first.
    let tuning = Tuning {
        payment_timeout: Duration::from_secs(3600),
        ..Tuning::default()
    };
    let (_redis, service) = redis_and_instance(&database, StrategyKind::RedisLock, tuning).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 3, open_window()).await;
    let id = click(&http, &base, voucher, 1)
        .await
        .order_id()
        .expect("order placed");
    let pool = sqlx::AnyPool::connect(&database.url).await.expect("pool");
    let overdue =
        format!("UPDATE voucher_order SET created_at = created_at - 3601000 WHERE id = {id}");
    pool.execute(sqlx::AssertSqlSafe(overdue))
        .await
        .expect("an hour and a second ago");
    pool.close().await;
    let (status, body) = order_action(&http, &base, id, "pay", 1).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "not_pending", "{body}");
    let (_, order) = get_order(&http, &base, id).await;
    assert_eq!(order["status"], "expired", "{order}");
    assert_eq!(voucher_stock(&http, &base, voucher).await, 3, "unit back");
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_without_a_redis_stock_does_not_wait_for_a_stalled_redis() {
    let database = TestDatabase::create(crate::support::Backend::Sqlite, "cancel_stalled")
        .await
        .expect("SQLite");
    let (redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 3, open_window()).await;
    let id = click(&http, &base, voucher, 1)
        .await
        .order_id()
        .expect("order placed");
    redis.pause().expect("pause redis-server");
    // redis-lock keeps its stock in the database only: cancelling is a
    // database write, whatever Redis is doing.
    let cancelled = tokio::time::timeout(
        Duration::from_secs(10),
        order_action(&http, &base, id, "cancel", 1),
    )
    .await;
    redis.resume().expect("resume redis-server");
    let (status, body) = cancelled.expect("the cancel waited on the stalled Redis");
    assert_eq!(
        (status, body["status"].clone()),
        (200, "cancelled".into()),
        "{body}"
    );
    assert_eq!(voucher_stock(&http, &base, voucher).await, 3, "unit back");
    service.shutdown().await;
}

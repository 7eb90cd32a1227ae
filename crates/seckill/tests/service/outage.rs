//! Redis stalling or losing its data: every request is answered within the
//! response timeout (503 with `Retry-After`), and the `reserve` consumer
//! creates again what Redis lost, so no accepted order is left unwritten;
//! readiness names a consumer that cannot consume.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::Value;

use crate::on_every_backend;
use crate::support::{
    Backend, TestDatabase, click, client, create_voucher, on_backend, open_window,
    redis_and_instance, start_instances, stock_of,
};

/// The shop's response timeout on its shared connection is 3 s; an answer
/// must come well within this, however long Redis stays stalled.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Polls `check` every 50 ms until it is true or `limit` passes.
async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(http: &reqwest::Client, url: &str) -> Option<(u16, Value)> {
    let response = http.get(url).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_answers_503_with_retry_after_within_the_timeout() {
    on_backend(Backend::Sqlite, "stalled_redis", |database| async move {
        let (redis, service) =
            redis_and_instance(&database, StrategyKind::Reserve, Tuning::default()).await;
        let http = client();
        let base = service.url();
        let voucher = create_voucher(&http, &base, 10, open_window()).await;
        assert_eq!(click(&http, &base, voucher, 1).await.status, Some(202));

        redis.pause().expect("pause redis-server");
        // A click, and a click with an Idempotency-Key (its claim is the
        // first Redis call), each from another user.
        let order = |headers: &'static [(&'static str, &'static str)]| {
            let mut request = http.post(format!("{base}/vouchers/{voucher}/orders"));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            tokio::spawn(async move {
                let asked = Instant::now();
                let answer = tokio::time::timeout(ANSWER_WITHIN, request.send()).await;
                (answer, asked.elapsed())
            })
        };
        let plain = order(&[("X-User-Id", "2")]);
        let keyed = order(&[("X-User-Id", "3"), ("Idempotency-Key", "stalled-1")]);
        let answers = [plain.await.expect("task"), keyed.await.expect("task")];
        redis.resume().expect("resume redis-server");
        for (which, (answer, waited)) in ["plain", "keyed"].into_iter().zip(answers) {
            let Ok(sent) = answer else {
                panic!("{which}: no answer within {ANSWER_WITHIN:?} while Redis stalled");
            };
            let response = sent.expect("an HTTP answer");
            assert_eq!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{which} after {waited:?}"
            );
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .and_then(|text| text.parse::<u64>().ok());
            assert!(
                retry_after.is_some_and(|seconds| seconds >= 1),
                "{which}: 503 without a Retry-After in whole seconds"
            );
            let body: Value = response.json().await.expect("JSON");
            assert_eq!(body["error"], "redis_unavailable", "{which}: {body}");
        }
        // And it serves again once Redis is back.
        let served = eventually(Duration::from_secs(10), || {
            let http = http.clone();
            let base = base.clone();
            async move { click(&http, &base, voucher, 4).await.status == Some(202) }
        })
        .await;
        assert!(served, "no order accepted after Redis came back");
        service.shutdown().await;
    })
    .await;
}

on_every_backend!(reserve_writes_orders_accepted_after_redis_lost_its_data);

/// The dead letters' `(order_id, user_id, reason)`, through the admin route.
async fn dead_letters(http: &reqwest::Client, base: &str) -> Vec<(i64, i64, String)> {
    let (status, body) = get(http, &format!("{base}/admin/dead-letters"))
        .await
        .expect("GET /admin/dead-letters");
    assert_eq!(status, 200, "{body}");
    body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| {
            (
                entry["order_id"].as_i64().unwrap_or_default(),
                entry["user_id"].as_i64().unwrap_or_default(),
                entry["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The order `order_id` as the database has it: its user.
async fn order_user(db: &seckill::db::Db, voucher: i64, order_id: i64) -> Option<i64> {
    let orders = db.orders(voucher).await.expect("orders");
    orders
        .iter()
        .find(|order| order.id == order_id)
        .map(|order| order.user_id)
}

async fn reserve_writes_orders_accepted_after_redis_lost_its_data(database: TestDatabase) {
    let http = client();
    let (mut redis, service) =
        redis_and_instance(&database, StrategyKind::Reserve, Tuning::default()).await;
    let base = service.url();
    let db = seckill::db::Db::connect(&database.url).await.expect("db");
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let first = click(&http, &base, voucher, 1).await;
    let first_id = first.order_id().expect("accepted");
    let written = eventually(Duration::from_secs(10), || async {
        order_user(&db, voucher, first_id).await.is_some()
    })
    .await;
    assert!(written);

    // A restart without persistence: the stream, its group, the stock and
    // the day's id counter are gone.
    redis.restart().expect("restart redis-server empty");
    let mut accepted = Vec::new();
    for user in 2..=4 {
        let deadline = Instant::now() + Duration::from_secs(15);
        let answer = loop {
            let answer = click(&http, &base, voucher, user).await;
            if answer.status != Some(503) || Instant::now() >= deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(answer.status, Some(202), "user {user}: {answer:?}");
        accepted.push((answer.order_id().expect("order id"), user));
    }
    // Each accepted order is written under its id for its user, or, when
    // the lost counter gave it an id already taken (a restart within the
    // same second), dead-lettered `id_collision`: never dropped unseen.
    for (order_id, user) in &accepted {
        let settled = eventually(Duration::from_secs(15), || async {
            match order_user(&db, voucher, *order_id).await {
                Some(owner) if owner == *user => true,
                _ => dead_letters(&http, &base).await.contains(&(
                    *order_id,
                    *user,
                    "id_collision".to_owned(),
                )),
            }
        })
        .await;
        assert!(
            settled,
            "order {order_id} of user {user}, accepted after Redis lost its data, \
             was neither written nor dead-lettered"
        );
    }
    // Stock exact: the database's and Redis's both count the written orders.
    let orders = db.orders(voucher).await.expect("orders").len() as i64;
    let stock = stock_of(&db, voucher).await;
    assert_eq!(stock, 10 - orders, "database stock");
    let mut admin = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin");
    let redis_stock: i64 = redis::cmd("GET")
        .arg(format!("{{seckill}}:stock:{voucher}"))
        .query_async(&mut admin)
        .await
        .expect("GET stock");
    assert_eq!(redis_stock, stock, "Redis stock against the database's");
    let ready = get(&http, &format!("{base}/health/ready")).await;
    assert_eq!(ready.map(|(status, _)| status), Some(200));
    db.close().await;
    service.shutdown().await;
}

on_every_backend!(an_order_id_drawn_again_is_dead_lettered_and_its_unit_returned);

/// A lost INCR of the day's counter hands out an id that an order already
/// has; the consumer must not take the second order for the first.
async fn an_order_id_drawn_again_is_dead_lettered_and_its_unit_returned(database: TestDatabase) {
    let (redis, service) =
        redis_and_instance(&database, StrategyKind::Reserve, Tuning::default()).await;
    let http = client();
    let base = service.url();
    let db = seckill::db::Db::connect(&database.url).await.expect("db");
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let first = click(&http, &base, voucher, 1).await;
    let taken = first.order_id().expect("accepted");
    assert!(
        eventually(Duration::from_secs(10), || async {
            order_user(&db, voucher, taken).await.is_some()
        })
        .await
    );
    // What reserve.lua does for user 2 when its INCR draws `taken` again.
    let mut admin = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin");
    let stock_key = format!("{{seckill}}:stock:{voucher}");
    let buyers_key = format!("{{seckill}}:buyers:{voucher}");
    let () = redis::pipe()
        .atomic()
        .decr(&stock_key, 1)
        .ignore()
        .sadd(&buyers_key, 2)
        .ignore()
        .cmd("XADD")
        .arg("{seckill}:orders")
        .arg("*")
        .arg("order_id")
        .arg(taken)
        .arg("user_id")
        .arg(2)
        .arg("voucher_id")
        .arg(voucher)
        .arg("created_at")
        .arg(chrono::Utc::now().timestamp_millis())
        .ignore()
        .query_async(&mut admin)
        .await
        .expect("the colliding reservation");
    let dead = eventually(Duration::from_secs(10), || async {
        dead_letters(&http, &base)
            .await
            .contains(&(taken, 2, "id_collision".to_owned()))
    })
    .await;
    assert!(dead, "the colliding order was not dead-lettered");
    assert_eq!(
        order_user(&db, voucher, taken).await,
        Some(1),
        "first order kept"
    );
    let redis_stock: i64 = redis::cmd("GET")
        .arg(&stock_key)
        .query_async(&mut admin)
        .await
        .expect("GET stock");
    assert_eq!(redis_stock, 9, "the colliding reservation's unit is back");
    // Replaying it gives nothing back twice; user 2 may simply order again.
    let replayed = http
        .post(format!("{base}/admin/dead-letters/replay"))
        .send()
        .await
        .expect("replay");
    assert_eq!(replayed.status(), 200);
    let again = eventually(Duration::from_secs(10), || async {
        dead_letters(&http, &base).await.len() == 1
    })
    .await;
    assert!(again, "the replayed entry was not dead-lettered again");
    let second = click(&http, &base, voucher, 2).await;
    assert_eq!(second.status, Some(202), "{second:?}");
    let redis_stock: i64 = redis::cmd("GET")
        .arg(&stock_key)
        .query_async(&mut admin)
        .await
        .expect("GET stock");
    assert_eq!(redis_stock, 8, "two orders, each unit counted once");
    db.close().await;
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_names_a_reserve_consumer_that_cannot_consume() {
    on_backend(Backend::Sqlite, "consumer_ready", |database| async move {
        let (redis, service) =
            redis_and_instance(&database, StrategyKind::Reserve, Tuning::default()).await;
        let http = client();
        let base = service.url();
        let ready_url = format!("{base}/health/ready");
        assert_eq!(
            get(&http, &ready_url).await.map(|(status, _)| status),
            Some(200)
        );
        // The order stream's key holds something else: Redis answers PING,
        // the consumer cannot read a single entry.
        let mut admin = redis
            .client()
            .get_multiplexed_async_connection()
            .await
            .expect("admin");
        let () = redis::pipe()
            .atomic()
            .del("{seckill}:orders")
            .ignore()
            .set("{seckill}:orders", "not a stream")
            .ignore()
            .query_async(&mut admin)
            .await
            .expect("break the stream");
        let named = eventually(Duration::from_secs(15), || {
            let http = http.clone();
            let ready_url = ready_url.clone();
            async move {
                matches!(get(&http, &ready_url).await,
                    Some((503, body)) if body["failing"] == serde_json::json!(["consumer"]))
            }
        })
        .await;
        assert!(named, "ready never named the consumer");
        // Once the key is gone the consumer makes the stream and group again.
        let () = redis::cmd("DEL")
            .arg("{seckill}:orders")
            .query_async::<i64>(&mut admin)
            .await
            .map(drop)
            .expect("DEL");
        let back = eventually(Duration::from_secs(15), || {
            let http = http.clone();
            let ready_url = ready_url.clone();
            async move { matches!(get(&http, &ready_url).await, Some((200, _))) }
        })
        .await;
        assert!(
            back,
            "ready did not come back once the consumer could consume"
        );
        service.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_cap_are_refused_at_once_while_redis_stalls() {
    on_backend(Backend::Sqlite, "in_flight_cap", |database| async move {
        let (redis, service) = redis_and_instance(
            &database,
            StrategyKind::Reserve,
            Tuning {
                max_in_flight: 2,
                ..Tuning::default()
            },
        )
        .await;
        let http = client();
        let base = service.url();
        let voucher = create_voucher(&http, &base, 10, open_window()).await;
        redis.pause().expect("pause redis-server");
        // Ten clicks at once: two get in and wait for Redis (its response
        // timeout, 3 s); the others arrive meanwhile and are refused at once.
        let clicks: Vec<_> = (1..=10)
            .map(|user| {
                let (http, base) = (http.clone(), base.clone());
                tokio::spawn(async move {
                    let response = http
                        .post(format!("{base}/vouchers/{voucher}/orders"))
                        .header("X-User-Id", user.to_string())
                        .send()
                        .await
                        .expect("an answer");
                    let retry_after = response.headers().get("retry-after").cloned();
                    let body: Value = response.json().await.unwrap_or(Value::Null);
                    (
                        body["error"].as_str().unwrap_or_default().to_owned(),
                        retry_after,
                    )
                })
            })
            .collect();
        let mut answers = Vec::new();
        for click in clicks {
            answers.push(click.await.expect("click"));
        }
        // Health still answers while Redis stalls.
        let live = get(&http, &format!("{base}/health/live")).await;
        redis.resume().expect("resume redis-server");
        assert_eq!(live.map(|(status, _)| status), Some(200));
        let overloaded: Vec<_> = answers
            .iter()
            .filter(|(error, _)| error == "overloaded")
            .collect();
        assert!(
            overloaded.len() >= 5,
            "clicks beyond the cap of 2 were not refused at once: {answers:?}"
        );
        for (_, retry_after) in overloaded {
            assert_eq!(retry_after.as_ref().map(|v| v.as_bytes()), Some(&b"1"[..]));
        }
        // The others waited for Redis and were told so (or got through).
        for (error, _) in &answers {
            assert!(
                ["overloaded", "redis_unavailable", ""].contains(&error.as_str()),
                "{answers:?}"
            );
        }
        service.shutdown().await;
    })
    .await;
}

/// What happens to Redis in a row of the shop's deadline test.
#[derive(Clone, Copy, Debug)]
enum RedisFault {
    /// SIGSTOP: connections open, nothing answers.
    Stalled,
    /// Killed: connections refused.
    Dead,
}

/// The shop's rows of the deadline test: with Redis stalled (SIGSTOP) or
/// dead, a `redis-lock` grab answers 503 `redis_unavailable` within its
/// Redis budget (the response timeout, 3 s, or the lock wait when longer)
/// plus a margin: one request, one deadline, whatever the lock wait.
/// (Before: with no lock wait, the seed's tryLock, 6.1 s while Redis
/// stalled: two Redis waits in a row, the lock's attempt and its retry.)
async fn grabs_answer_within_one_redis_timeout(fault: RedisFault, database: TestDatabase) {
    /// The shop's response timeout on its locks' client.
    const REDIS_TIMEOUT: Duration = Duration::from_secs(3);
    const MARGIN: Duration = Duration::from_secs(1);
    let mut redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    let rows = [Duration::ZERO, Duration::from_secs(1)];
    let mut services = Vec::new();
    for lock_wait in rows {
        let service = start_instances(
            &redis.url(),
            &database.url,
            StrategyKind::RedisLock,
            1,
            Tuning {
                lock_wait,
                ..Tuning::default()
            },
        )
        .await
        .remove(0);
        services.push((lock_wait, service));
    }
    let base = services[0].1.url();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    // Warm: each instance has placed an order (its connection and scripts are up).
    for (user, (_, service)) in services.iter().enumerate() {
        let answer = click(&http, &service.url(), voucher, 100 + user as i64).await;
        assert!(matches!(answer.status, Some(201 | 202)), "{answer:?}");
    }
    match fault {
        RedisFault::Stalled => redis.pause().expect("pause redis-server"),
        RedisFault::Dead => redis.kill().expect("kill redis-server"),
    }
    let grabs = services
        .iter()
        .enumerate()
        .map(|(user, (lock_wait, service))| {
            let (http, base) = (http.clone(), service.url());
            async move {
                let asked = Instant::now();
                let answer = click(&http, &base, voucher, user as i64 + 1).await;
                (*lock_wait, answer, asked.elapsed())
            }
        });
    let answers = futures_util::future::join_all(grabs).await;
    if let RedisFault::Stalled = fault {
        redis.resume().expect("resume redis-server");
    }
    for (lock_wait, answer, took) in answers {
        eprintln!("{fault:?} Redis, lock wait {lock_wait:?}: {took:?}: {answer:?}");
        let budget = REDIS_TIMEOUT.max(lock_wait) + MARGIN;
        assert_eq!(
            answer.status,
            Some(503),
            "{fault:?}, lock wait {lock_wait:?}: {answer:?}"
        );
        assert_eq!(answer.body["error"], "redis_unavailable", "{answer:?}");
        assert!(
            took <= budget,
            "{fault:?}, lock wait {lock_wait:?}: answered after {took:?} (budget {budget:?})"
        );
    }
    for (_, service) in services {
        service.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_lock_grab_answers_within_one_redis_timeout_while_redis_stalls() {
    on_backend(Backend::Sqlite, "stalled_grab", |database| {
        grabs_answer_within_one_redis_timeout(RedisFault::Stalled, database)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_lock_grab_answers_within_one_redis_timeout_when_redis_is_dead() {
    on_backend(Backend::Sqlite, "dead_grab", |database| {
        grabs_answer_within_one_redis_timeout(RedisFault::Dead, database)
    })
    .await;
}

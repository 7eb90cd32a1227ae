//! The reserve consumer's durability: entries that can never be written go
//! to the dead-letter stream (listed and replayed through `/admin`), a
//! passing database failure is retried, acknowledged entries are trimmed
//! and pending ones kept, and the admin token guards what it should.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use seckill::db::Db;
use seckill::reserve_consumer::dead_letter::DEAD_STREAM;
use seckill::serve::{Service, Tuning};
use seckill::strategy::StrategyKind;
use seckill::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM};
use serde_json::Value;
use sqlx::{Connection, Executor};

use crate::on_every_backend;
use crate::support::{
    Click, TestDatabase, click, client, create_voucher, metrics_page, open_window, start_instances,
    stock_of,
};

/// Patience for anything the consumer does in the background.
const PATIENCE: Duration = Duration::from_secs(20);

/// Runs one SQL statement on the test's database, outside the service.
async fn sql(database_url: &str, statement: String) {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(database_url)
        .await
        .expect("connect to the test database");
    conn.execute(sqlx::AssertSqlSafe(statement))
        .await
        .expect("SQL statement");
    conn.close().await.ok();
}

/// The order id of an accepted click (201 written, 202 accepted for writing).
fn accepted(click: &Click) -> i64 {
    assert!(
        matches!(click.status, Some(201 | 202)),
        "order not accepted: {click:?}"
    );
    click.body["order_id"].as_i64().expect("order_id")
}

/// `GET /admin/dead-letters` (no token).
async fn dead_letters(http: &reqwest::Client, base: &str) -> Value {
    let response = http
        .get(format!("{base}/admin/dead-letters"))
        .send()
        .await
        .expect("GET /admin/dead-letters");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

/// Waits until the dead-letter list counts `count` entries; returns it.
async fn wait_for_dead_letters(http: &reqwest::Client, base: &str, count: u64) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listed = dead_letters(http, base).await;
        if listed["count"].as_u64() == Some(count) {
            return listed;
        }
        assert!(
            Instant::now() < deadline,
            "waited for {count} dead letters: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until voucher `voucher` has exactly `ids` as orders in the database.
async fn wait_for_orders(database_url: &str, voucher: i64, ids: &BTreeSet<i64>) {
    let db = Db::connect(database_url).await.expect("database");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let orders: BTreeSet<i64> = db
            .orders(voucher)
            .await
            .expect("orders")
            .iter()
            .map(|order| order.id)
            .collect();
        if &orders == ids {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orders {orders:?}, waited for {ids:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    db.close().await;
}

async fn db_stock(database_url: &str, voucher: i64) -> i64 {
    let db = Db::connect(database_url).await.expect("database");
    let stock = stock_of(&db, voucher).await;
    db.close().await;
    stock
}

/// The value of the series `name{labels}` on `/metrics` (0 when absent).
async fn metric(http: &reqwest::Client, base: &str, series: &str) -> f64 {
    let page = metrics_page(http, base).await;
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn dead_series(reason: &str) -> String {
    format!("seckill_reserve_dead_letters_total{{reason=\"{reason}\"}}")
}

fn pending_count(conn: &mut redis::Connection) -> u64 {
    let summary: (u64, redis::Value, redis::Value, redis::Value) = redis::cmd("XPENDING")
        .arg(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .query(conn)
        .expect("XPENDING");
    summary.0
}

async fn one_instance(
    redis: &testkit::RedisServer,
    database: &TestDatabase,
    tuning: Tuning,
) -> Service {
    start_instances(
        &redis.url(),
        &database.url,
        StrategyKind::Reserve,
        1,
        tuning,
    )
    .await
    .remove(0)
}

on_every_backend!(unwritable_entries_are_dead_lettered_counted_and_listed);

async fn unwritable_entries_are_dead_lettered_counted_and_listed(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let service = one_instance(&redis, &database, Tuning::default()).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 5, open_window()).await;
    let reasons = ["duplicate_user", "malformed", "voucher_gone", "no_stock"];
    let mut before = Vec::new();
    for reason in reasons {
        before.push(metric(&http, &base, &dead_series(reason)).await);
    }

    // duplicate_user: the database has user 4's order, Redis does not know.
    sql(
        &database.url,
        format!(
            "INSERT INTO voucher_order (id, user_id, voucher_id, created_at) VALUES (77, 4, {voucher}, 0)"
        ),
    )
    .await;
    let duplicate = accepted(&click(&http, &base, voucher, 4).await);
    wait_for_dead_letters(&http, &base, 1).await;

    // malformed and voucher_gone: entries nobody's reservation made.
    let mut conn = redis.conn();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let _: String = redis::cmd("XADD")
        .arg(ORDERS_STREAM)
        .arg("*")
        .arg(&[("order_id", "x"), ("user_id", "1")])
        .arg("voucher_id")
        .arg(voucher)
        .query(&mut conn)
        .expect("XADD malformed");
    let _: String = redis::cmd("XADD")
        .arg(ORDERS_STREAM)
        .arg("*")
        .arg("order_id")
        .arg(900_001)
        .arg("user_id")
        .arg(2)
        .arg("voucher_id")
        .arg(987_654)
        .arg("created_at")
        .arg(now_ms)
        .query(&mut conn)
        .expect("XADD voucher gone");
    wait_for_dead_letters(&http, &base, 3).await;

    // no_stock: the database's stock is gone, Redis still has some.
    sql(
        &database.url,
        format!("UPDATE voucher SET stock = 0 WHERE id = {voucher}"),
    )
    .await;
    let no_stock = accepted(&click(&http, &base, voucher, 3).await);
    let listed = wait_for_dead_letters(&http, &base, 4).await;

    let entries = listed["entries"].as_array().expect("entries");
    let by_reason = |reason: &str| -> &Value {
        entries
            .iter()
            .find(|entry| entry["reason"] == reason)
            .unwrap_or_else(|| panic!("no {reason} dead letter in {listed}"))
    };
    let listed_reasons: HashSet<&str> = entries
        .iter()
        .map(|entry| entry["reason"].as_str().expect("reason"))
        .collect();
    assert_eq!(listed_reasons, reasons.into_iter().collect());
    let ids: Vec<&str> = entries
        .iter()
        .map(|entry| entry["id"].as_str().expect("id"))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| {
        let (ms, seq) = id.split_once('-').expect("stream id");
        (
            ms.parse::<u64>().expect("ms"),
            seq.parse::<u64>().expect("seq"),
        )
    });
    assert_eq!(ids, sorted, "oldest first");
    for entry in entries {
        assert_eq!(entry["tries"], 1, "{entry}");
        assert!(
            entry["source_id"]
                .as_str()
                .is_some_and(|id| id.contains('-')),
            "{entry}"
        );
    }
    assert_eq!(by_reason("duplicate_user")["order_id"], duplicate);
    assert_eq!(by_reason("duplicate_user")["user_id"], 4);
    assert_eq!(by_reason("no_stock")["order_id"], no_stock);
    assert_eq!(by_reason("no_stock")["voucher_id"], voucher);
    assert_eq!(by_reason("malformed")["order_id"], "x");
    assert_eq!(by_reason("malformed")["created_at"], Value::Null);
    assert_eq!(by_reason("voucher_gone")["order_id"], 900_001);
    assert_eq!(by_reason("voucher_gone")["created_at"], now_ms);

    // Paging: after the second one, the last two.
    let page = http
        .get(format!("{base}/admin/dead-letters?after={}", ids[1]))
        .send()
        .await
        .expect("GET page")
        .json::<Value>()
        .await
        .expect("JSON");
    assert_eq!(page["count"], 4);
    let paged: Vec<&str> = page["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| entry["id"].as_str().expect("id"))
        .collect();
    assert_eq!(paged, ids[2..].to_vec());
    let bad_page = http
        .get(format!("{base}/admin/dead-letters?after=yesterday"))
        .send()
        .await
        .expect("GET bad page");
    assert_eq!(bad_page.status(), 400);

    // Acknowledged on the order stream, written nowhere, counted.
    assert_eq!(pending_count(&mut conn), 0, "dead letters are acknowledged");
    let dead_len: u64 = redis::cmd("XLEN")
        .arg(DEAD_STREAM)
        .query(&mut conn)
        .expect("XLEN");
    assert_eq!(dead_len, 4);
    let db = Db::connect(&database.url).await.expect("database");
    let orders = db.orders(voucher).await.expect("orders");
    db.close().await;
    assert_eq!(
        orders.iter().map(|order| order.id).collect::<Vec<_>>(),
        vec![77],
        "only the order inserted by hand"
    );
    for (reason, before) in reasons.into_iter().zip(before) {
        let after = metric(&http, &base, &dead_series(reason)).await;
        assert!(after >= before + 1.0, "{reason}: {before} -> {after}");
    }
    service.shutdown().await;
}

on_every_backend!(a_replayed_dead_letter_is_written_once_its_cause_is_fixed);

async fn a_replayed_dead_letter_is_written_once_its_cause_is_fixed(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let service = one_instance(&redis, &database, Tuning::default()).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 3, open_window()).await;
    let set_stock = |stock: i64| {
        sql(
            &database.url,
            format!("UPDATE voucher SET stock = {stock} WHERE id = {voucher}"),
        )
    };

    set_stock(0).await;
    let first = accepted(&click(&http, &base, voucher, 1).await);
    let listed = wait_for_dead_letters(&http, &base, 1).await;
    let dead_id = listed["entries"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(listed["entries"][0]["reason"], "no_stock");

    for unknown in ["1-1", "nonsense"] {
        let response = http
            .post(format!("{base}/admin/dead-letters/{unknown}/replay"))
            .send()
            .await
            .expect("POST replay");
        assert_eq!(response.status(), 404, "{unknown}");
    }

    // The cause fixed, the replay writes it.
    set_stock(3).await;
    let replayed: Value = http
        .post(format!("{base}/admin/dead-letters/{dead_id}/replay"))
        .send()
        .await
        .expect("POST replay")
        .json()
        .await
        .expect("JSON");
    assert_eq!(replayed["replayed"], 1, "{replayed}");
    wait_for_orders(&database.url, voucher, &BTreeSet::from([first])).await;
    assert_eq!(dead_letters(&http, &base).await["count"], 0);
    let again = http
        .post(format!("{base}/admin/dead-letters/{dead_id}/replay"))
        .send()
        .await
        .expect("POST replay again");
    assert_eq!(again.status(), 404, "a replayed dead letter is gone");

    // Two more, replayed at once.
    set_stock(0).await;
    let second = accepted(&click(&http, &base, voucher, 2).await);
    let third = accepted(&click(&http, &base, voucher, 3).await);
    wait_for_dead_letters(&http, &base, 2).await;
    set_stock(2).await;
    let replayed: Value = http
        .post(format!("{base}/admin/dead-letters/replay"))
        .send()
        .await
        .expect("POST replay all")
        .json()
        .await
        .expect("JSON");
    assert_eq!(replayed["replayed"], 2, "{replayed}");
    wait_for_orders(
        &database.url,
        voucher,
        &BTreeSet::from([first, second, third]),
    )
    .await;
    assert_eq!(db_stock(&database.url, voucher).await, 0);
    assert_eq!(dead_letters(&http, &base).await["count"], 0);
    let mut conn = redis.conn();
    assert_eq!(pending_count(&mut conn), 0);
    service.shutdown().await;
}

on_every_backend!(a_passing_database_failure_is_retried_not_dead_lettered);

async fn a_passing_database_failure_is_retried_not_dead_lettered(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    // Many tries with a short first backoff: the test judges retries by the
    // delivery count, not by time.
    let tuning = Tuning {
        consumer_max_tries: 50,
        consumer_backoff: Duration::from_millis(20),
        ..Tuning::default()
    };
    let service = one_instance(&redis, &database, tuning).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 3, open_window()).await;

    // The fault: the orders table is away, every write fails.
    sql(
        &database.url,
        "ALTER TABLE voucher_order RENAME TO voucher_order_away".to_owned(),
    )
    .await;
    let order = accepted(&click(&http, &base, voucher, 1).await);
    let mut conn = redis.conn();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
            .arg(ORDERS_STREAM)
            .arg(CONSUMER_GROUP)
            .arg("-")
            .arg("+")
            .arg(10)
            .query(&mut conn)
            .expect("XPENDING");
        if pending.first().is_some_and(|entry| entry.3 >= 3) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the entry was not retried: {pending:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The fault passes: the next retry writes it.
    sql(
        &database.url,
        "ALTER TABLE voucher_order_away RENAME TO voucher_order".to_owned(),
    )
    .await;
    wait_for_orders(&database.url, voucher, &BTreeSet::from([order])).await;
    assert_eq!(db_stock(&database.url, voucher).await, 2);
    let deadline = Instant::now() + PATIENCE;
    while pending_count(&mut conn) > 0 {
        assert!(Instant::now() < deadline, "still pending");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        dead_letters(&http, &base).await["count"],
        0,
        "not dead-lettered"
    );
    service.shutdown().await;
}

on_every_backend!(trimming_removes_acknowledged_entries_and_keeps_pending_ones);

async fn trimming_removes_acknowledged_entries_and_keeps_pending_ones(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    // Trim often; never claim the stand-in dead consumer's entries.
    let tuning = Tuning {
        trim_every: Duration::from_millis(50),
        claim_idle: Duration::from_secs(600),
        ..Tuning::default()
    };
    let service = one_instance(&redis, &database, tuning).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let mut written = BTreeSet::new();
    for user in 1..=3 {
        written.insert(accepted(&click(&http, &base, voucher, user).await));
    }
    wait_for_orders(&database.url, voucher, &written).await;

    // Two entries read by a consumer that never acknowledges them.
    let mut conn = redis.conn();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for user in [101i64, 102] {
        pipe.cmd("XADD")
            .arg(ORDERS_STREAM)
            .arg("*")
            .arg("order_id")
            .arg(5_000 + user)
            .arg("user_id")
            .arg(user)
            .arg("voucher_id")
            .arg(voucher)
            .arg("created_at")
            .arg(now_ms);
    }
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
    let (first_pending, second_pending): (String, String) = pipe.query(&mut conn).expect("MULTI");
    for user in 4..=5 {
        written.insert(accepted(&click(&http, &base, voucher, user).await));
    }
    wait_for_orders(&database.url, voucher, &written).await;

    // The three acknowledged entries before the oldest pending one go; the
    // pending ones and the acknowledged ones after them stay.
    let deadline = Instant::now() + PATIENCE;
    let kept = loop {
        let kept = stream_ids(&mut conn);
        if kept.len() == 4 {
            break kept;
        }
        assert!(Instant::now() < deadline, "not trimmed: {kept:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(kept[..2], [first_pending.clone(), second_pending.clone()]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        stream_ids(&mut conn),
        kept,
        "pending entries are never trimmed"
    );

    // Once nothing is pending, everything delivered goes.
    let _: u64 = redis::cmd("XACK")
        .arg(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .arg(&first_pending)
        .arg(&second_pending)
        .query(&mut conn)
        .expect("XACK");
    let deadline = Instant::now() + PATIENCE;
    while !stream_ids(&mut conn).is_empty() {
        assert!(
            Instant::now() < deadline,
            "not trimmed: {:?}",
            stream_ids(&mut conn)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        metric(
            &http,
            &base,
            "seckill_reserve_trimmed_total{consumer=\"instance-1\"}"
        )
        .await
            >= 5.0
    );
    // The trimmed stream keeps working.
    written.insert(accepted(&click(&http, &base, voucher, 6).await));
    wait_for_orders(&database.url, voucher, &written).await;
    service.shutdown().await;
}

fn stream_ids(conn: &mut redis::Connection) -> Vec<String> {
    let range: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(ORDERS_STREAM)
        .arg("-")
        .arg("+")
        .query(conn)
        .expect("XRANGE");
    range.ids.into_iter().map(|entry| entry.id).collect()
}

on_every_backend!(the_admin_token_guards_voucher_creation_and_admin_routes);

async fn the_admin_token_guards_voucher_creation_and_admin_routes(database: TestDatabase) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let guarded = one_instance(
        &redis,
        &database,
        Tuning {
            admin_token: Some("s3cret".to_owned()),
            ..Tuning::default()
        },
    )
    .await;
    let base = guarded.url();
    let http = client();
    let voucher_body = serde_json::json!({
        "title": "100 off", "stock": 1,
        "begin_at": open_window().0.to_rfc3339(), "end_at": open_window().1.to_rfc3339(),
    });
    let requests = [
        ("POST", "/vouchers", 201),
        ("GET", "/admin/dead-letters", 200),
        ("POST", "/admin/dead-letters/replay", 200),
        ("POST", "/admin/dead-letters/1-1/replay", 404),
    ];
    for (method, path, allowed) in requests {
        for authorization in [
            None,
            Some("Bearer nope"),
            Some("Basic s3cret"),
            Some("Bearer s3cret"),
        ] {
            let mut request = http
                .request(method.parse().expect("method"), format!("{base}{path}"))
                .json(&voucher_body);
            if let Some(value) = authorization {
                request = request.header("Authorization", value);
            }
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            if authorization == Some("Bearer s3cret") {
                assert_eq!(status, allowed, "{method} {path}");
                continue;
            }
            assert_eq!(status, 401, "{method} {path} with {authorization:?}");
            assert_eq!(
                response
                    .headers()
                    .get("www-authenticate")
                    .map(|v| v.to_str().ok()),
                Some(Some("Bearer"))
            );
            let body: Value = response.json().await.expect("JSON");
            assert_eq!(body["error"], "unauthorized", "{body}");
        }
    }
    let listed = http
        .get(format!("{base}/vouchers"))
        .send()
        .await
        .expect("GET /vouchers");
    assert_eq!(listed.status(), 200, "reading needs no token");

    // No token on a non-loopback address: /admin/* and voucher creation are closed.
    let mut config =
        crate::support::config(&redis.url(), &database.url, StrategyKind::Reserve, 2, false);
    config.listen = "0.0.0.0:0".parse().expect("address");
    // Header auth is refused off loopback; users by JWT, as in production.
    let exposed = seckill::serve::start_tuned(
        config,
        Tuning {
            auth: seckill::api::auth::AuthConfig::Jwt {
                secret: "a secret for the tests, 32 bytes or more".to_owned(),
            },
            ..Tuning::default()
        },
    )
    .await
    .expect("instance starts");
    let exposed_base = format!("http://127.0.0.1:{}", exposed.addr().port());
    let response = http
        .get(format!("{exposed_base}/admin/dead-letters"))
        .send()
        .await
        .expect("GET /admin/dead-letters");
    assert_eq!(response.status(), 401);
    let created = http
        .post(format!("{exposed_base}/vouchers"))
        .json(&voucher_body)
        .send()
        .await
        .expect("POST /vouchers");
    assert_eq!(
        created.status(),
        401,
        "no token off loopback: nobody may create vouchers"
    );
    exposed.shutdown().await;
    guarded.shutdown().await;
}

//! The API's protection: who the user is (`--auth header|jwt`), idempotency
//! keys, the per-user rate limit and the local sold-out flag.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use seckill::api::auth::AuthConfig;
use seckill::db::Db;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};
use sqlx::{Connection, Executor};

use crate::on_every_backend;
use crate::support::{
    Backend, TestDatabase, click, client, config, create_voucher, metrics_page, open_window,
    redis_and_instance,
};

const SECRET: &str = "a secret for the tests, 32 bytes or more";

/// A POST's status, headers and JSON body.
async fn post(request: reqwest::RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = request.send().await.expect("POST");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

fn order_url(base: &str, voucher: i64) -> String {
    format!("{base}/vouchers/{voucher}/orders")
}

/// The order id `user` has of `voucher`, from the order list.
async fn body_order_id(http: &reqwest::Client, base: &str, voucher: i64, user: i64) -> i64 {
    let listed: Value = http
        .get(order_url(base, voucher))
        .send()
        .await
        .expect("GET orders")
        .json()
        .await
        .expect("JSON");
    listed["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .find(|order| order["user_id"] == user)
        .and_then(|order| order["order_id"].as_i64())
        .expect("the user's order")
}

fn token(secret: &str, claims: Value) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("token")
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

async fn sqlite() -> TestDatabase {
    TestDatabase::create(Backend::Sqlite, "protection")
        .await
        .expect("SQLite")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_mode_knows_users_by_their_token_only() {
    let database = sqlite().await;
    let (_redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            auth: AuthConfig::Jwt {
                secret: SECRET.to_owned(),
            },
            ..Tuning::default()
        },
    )
    .await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let place = |authorization: Option<String>| {
        let mut request = http
            .post(order_url(&base, voucher))
            .header("X-User-Id", "5");
        if let Some(authorization) = authorization {
            request = request.header("Authorization", authorization);
        }
        post(request)
    };

    let good = token(SECRET, json!({"sub": "7", "exp": now() + 3600}));
    let (status, _, body) = place(Some(format!("Bearer {good}"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // `sub` as a JSON number names a user too.
    let numeric = token(SECRET, json!({"sub": 8, "exp": now() + 3600}));
    let (status, _, body) = place(Some(format!("Bearer {numeric}"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let refusals = [
        ("missing", None),
        (
            "expired",
            Some(format!(
                "Bearer {}",
                token(SECRET, json!({"sub": "9", "exp": now() - 3600}))
            )),
        ),
        (
            "bad signature",
            Some(format!(
                "Bearer {}",
                token("another secret", json!({"sub": "9", "exp": now() + 3600}))
            )),
        ),
        (
            "bad sub",
            Some(format!(
                "Bearer {}",
                token(SECRET, json!({"sub": "nobody", "exp": now() + 3600}))
            )),
        ),
        ("not a JWT", Some("Bearer abc.def.ghi".to_owned())),
        (
            "sub with leading zeros",
            Some(format!(
                "Bearer {}",
                token(SECRET, json!({"sub": "007", "exp": now() + 3600}))
            )),
        ),
    ];
    for (case, authorization) in refusals {
        let (status, headers, body) = place(authorization).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}: {body}");
        assert_eq!(body["error"], "unauthorized", "{case}: {body}");
        assert_eq!(headers["www-authenticate"], "Bearer", "{case}");
    }

    // Paying is the buyer's, known by the token: user 8's token is refused
    // on user 7's order even with `X-User-Id: 7`; user 7's token pays.
    let first = body_order_id(&http, &base, voucher, 7).await;
    let pay = |authorization: String| {
        post(
            http.post(format!("{base}/orders/{first}/pay"))
                .header("X-User-Id", "7")
                .header("Authorization", authorization),
        )
    };
    let (status, _, body) = pay(format!("Bearer {numeric}")).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::FORBIDDEN, json!("forbidden"))
    );
    let (status, _, body) = pay("Bearer nothing".to_owned()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, _, body) = pay(format!("Bearer {good}")).await;
    assert_eq!(
        (status, body["status"].clone()),
        (StatusCode::OK, json!("paid"))
    );

    // The orders are the token's users', not X-User-Id's.
    let db = Db::connect(&database.url).await.expect("database");
    let users: HashSet<i64> = db
        .orders(voucher)
        .await
        .expect("orders")
        .iter()
        .map(|order| order.user_id)
        .collect();
    db.close().await;
    assert_eq!(users, HashSet::from([7, 8]));
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_mode_refuses_to_start_on_a_public_address() {
    let database = sqlite().await;
    let mut public = config(
        "redis://127.0.0.1:1",
        &database.url,
        StrategyKind::RedisLock,
        1,
        false,
    );
    public.listen = "0.0.0.0:0".parse().expect("address");
    let refused = seckill::serve::start_tuned(public, Tuning::default()).await;
    let Err(error) = refused else {
        panic!("header mode must not start on 0.0.0.0");
    };
    let message = error.to_string();
    assert!(
        message.contains("--auth header") && message.contains("loopback"),
        "{message}"
    );
}

#[test]
fn the_command_line_wants_a_secret_for_jwt() {
    use clap::Parser;
    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        serve: seckill::serve::ServeArgs,
    }
    // The secret may also come from the environment; this test needs it unset.
    if std::env::var_os("SECKILL_JWT_SECRET").is_some() {
        eprintln!("notice: SECKILL_JWT_SECRET is set; skipping");
        return;
    }
    assert!(Command::try_parse_from(["serve", "--auth", "jwt"]).is_err());
    let parsed = Command::try_parse_from([
        "serve",
        "--auth",
        "jwt",
        "--jwt-secret",
        "s",
        "--rate-limit",
        "5/s",
        "--sold-out-recheck",
        "250ms",
    ])
    .expect("parses");
    assert_eq!(
        parsed
            .serve
            .rate_limit
            .map(|limit| limit.to_string())
            .as_deref(),
        Some("5/s")
    );
    assert_eq!(parsed.serve.sold_out_recheck, Duration::from_millis(250));
    assert!(Command::try_parse_from(["serve", "--rate-limit", "fast"]).is_err());
}

on_every_backend!(an_idempotency_key_places_one_order);

async fn an_idempotency_key_places_one_order(database: TestDatabase) {
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let other_voucher = create_voucher(&http, &base, 10, open_window()).await;
    let keyed = |voucher: i64, user: i64, key: &str| {
        http.post(order_url(&base, voucher))
            .header("X-User-Id", user.to_string())
            .header("Idempotency-Key", key)
    };

    // The same key again: the first answer, and one order.
    let (status, headers, first) = post(keyed(voucher, 1, "key-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(headers.get("idempotent-replayed").is_none());
    let (status, headers, again) = post(keyed(voucher, 1, "key-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(again, first);

    // A 4xx is kept too: a new key, an answer of its own, replayed.
    let (status, _, refused) = post(keyed(voucher, 1, "key-2")).await;
    assert_eq!(
        (status, refused["error"].clone()),
        (StatusCode::CONFLICT, json!("already_ordered"))
    );
    let (status, headers, replayed) = post(keyed(voucher, 1, "key-2")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replayed, refused);

    // The key on another path is a mistake; another user's key is their own.
    let (status, _, body) = post(keyed(other_voucher, 1, "key-1")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"], "idempotency_key_reused");
    let (status, headers, body) = post(keyed(voucher, 2, "key-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(headers.get("idempotent-replayed").is_none());
    assert_ne!(body["order_id"], first["order_id"]);

    for bad in ["", "two words", &"k".repeat(201)] {
        let (status, _, body) = post(keyed(voucher, 3, bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}");
        assert_eq!(body["error"], "bad_idempotency_key", "{bad:?}");
    }

    // Eight clicks at once with one key: one order; each answer is that
    // order (the first or a replay) or in_progress.
    let clicks = (0..8).map(|_| tokio::spawn(post(keyed(voucher, 4, "storm"))));
    let answers: Vec<_> = futures_util::future::join_all(clicks)
        .await
        .into_iter()
        .map(|joined| joined.expect("click"))
        .collect();
    let order_ids: HashSet<String> = answers
        .iter()
        .filter(|(status, _, _)| *status == StatusCode::CREATED)
        .map(|(_, _, body)| body["order_id"].to_string())
        .collect();
    assert_eq!(order_ids.len(), 1, "{answers:?}");
    for (status, _, body) in &answers {
        if *status != StatusCode::CREATED {
            assert_eq!(
                (*status, body["error"].as_str()),
                (StatusCode::CONFLICT, Some("in_progress")),
                "{answers:?}"
            );
        }
    }

    let db = Db::connect(&database.url).await.expect("database");
    let orders = db.orders(voucher).await.expect("orders");
    db.close().await;
    let per_user = |user: i64| orders.iter().filter(|order| order.user_id == user).count();
    assert_eq!(
        (per_user(1), per_user(2), per_user(3), per_user(4)),
        (1, 1, 0, 1)
    );
    assert_eq!(orders.len(), 3);
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_answer_is_not_kept_and_no_redis_means_no_work() {
    let database = sqlite().await;
    let (redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            lock_wait: Duration::from_millis(200),
            ..Tuning::default()
        },
    )
    .await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let keyed = |key: &str| {
        http.post(order_url(&base, voucher))
            .header("X-User-Id", "7")
            .header("Idempotency-Key", key)
    };

    // A route without a user: the caller is whoever sends no credentials.
    let create = || {
        post(
            http.post(format!("{base}/vouchers"))
                .header("Idempotency-Key", "new-voucher")
                .json(&json!({"title": "t", "stock": 1,
                    "begin_at": "2025-01-01T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"})),
        )
    };
    let (status, _, created) = create().await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, headers, again) = create().await;
    assert_eq!((status, again), (StatusCode::CREATED, created));
    assert_eq!(headers["idempotent-replayed"], "true");
    let listed = http
        .get(format!("{base}/vouchers"))
        .send()
        .await
        .expect("GET /vouchers")
        .json::<Value>()
        .await
        .expect("JSON");
    assert_eq!(
        listed["vouchers"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );

    // Another holder of the user's lock: the order answers 503 busy.
    let other = redlatch::Client::connect(&redis.url())
        .await
        .expect("lock client");
    let held = other
        .lock(seckill::strategy::redis_lock::lock_name(voucher, 7))
        .acquire()
        .await
        .expect("hold the user's lock");
    let (status, _, body) = post(keyed("retry-me")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "busy");
    held.release().await.expect("release");

    // The retry with the same key does the work: the 503 was not kept.
    let (status, headers, placed) = post(keyed("retry-me")).await;
    assert_eq!(status, StatusCode::CREATED, "{placed}");
    assert!(headers.get("idempotent-replayed").is_none());
    let (_, headers, replayed) = post(keyed("retry-me")).await;
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replayed, placed);

    // Without Redis the key cannot be guarded: 503 before the handler runs.
    drop(redis);
    let (status, _, body) = post(keyed("no-redis")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "redis_unavailable");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("idempotency"),
        "refused by the guard, not by the order: {body}"
    );
    service.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_rate_limit_a_user_gets_429_with_retry_after() {
    let database = sqlite().await;
    let (_redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            rate_limit: Some("1/s".parse().expect("limit")),
            ..Tuning::default()
        },
    )
    .await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let place = |user: i64| {
        post(
            http.post(order_url(&base, voucher))
                .header("X-User-Id", user.to_string()),
        )
    };

    // Six clicks at once by one user, at one a second: most are refused.
    let answers = futures_util::future::join_all((0..6).map(|_| place(1))).await;
    let limited: Vec<_> = answers
        .iter()
        .filter(|(status, _, _)| *status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert!(!limited.is_empty(), "{answers:?}");
    for (_, headers, body) in &limited {
        assert_eq!(body["error"], "rate_limited", "{body}");
        let after: u64 = headers["retry-after"]
            .to_str()
            .expect("text")
            .parse()
            .expect("whole seconds");
        assert!(after >= 1, "{after}");
    }
    // Another user has a budget of their own.
    let (status, _, body) = place(2).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // A 429 is not kept as a key's answer: after Retry-After the same key
    // places the order. A user spends the second's budget, then clicks with
    // a key at once; a machine so slow that a second passed in between
    // tries with the next user.
    let mut judged = false;
    for user in 10..15 {
        let (status, _, body) = place(user).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let keyed = || {
            post(
                http.post(order_url(&base, voucher))
                    .header("X-User-Id", user.to_string())
                    .header("Idempotency-Key", "after-a-429"),
            )
        };
        let (status, headers, _) = keyed().await;
        if status != StatusCode::TOO_MANY_REQUESTS {
            continue;
        }
        let after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        tokio::time::sleep(Duration::from_secs(after)).await;
        let (status, headers, body) = keyed().await;
        assert_eq!(status, StatusCode::CONFLICT, "the handler ran: {body}");
        assert_eq!(body["error"], "already_ordered");
        assert!(headers.get("idempotent-replayed").is_none());
        judged = true;
        break;
    }
    assert!(
        judged,
        "no keyed click came within a second of the one before"
    );

    let page = metrics_page(&http, &base).await;
    assert!(page.contains(seckill::metrics::RATE_LIMITED), "{page}");
    service.shutdown().await;
}

/// Sets a voucher's stock in the database behind the service's back, as
/// another instance's cancellation would.
async fn set_stock(database: &TestDatabase, voucher: i64, stock: i64) {
    let statement = sqlx::AssertSqlSafe(format!(
        "UPDATE voucher SET stock = {stock} WHERE id = {voucher}"
    ));
    match database.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&database.url)
                .await
                .expect("SQLite");
            conn.execute(statement).await.expect("update");
            conn.close().await.ok();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&database.url)
                .await
                .expect("PostgreSQL");
            conn.execute(statement).await.expect("update");
            conn.close().await.ok();
        }
        Backend::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(&database.url)
                .await
                .expect("MySQL");
            conn.execute(statement).await.expect("update");
            conn.close().await.ok();
        }
    }
}

/// An instance whose sold-out flag is rechecked only after an hour, and a
/// voucher of one unit on sale there.
async fn one_unit_flagged_an_hour(
    database: &TestDatabase,
) -> (testkit::RedisServer, seckill::serve::Service, i64) {
    let (redis, service) = redis_and_instance(
        database,
        StrategyKind::RedisLock,
        Tuning {
            sold_out_recheck: Duration::from_secs(3600),
            ..Tuning::default()
        },
    )
    .await;
    let voucher = create_voucher(&client(), &service.url(), 1, open_window()).await;
    (redis, service, voucher)
}

on_every_backend!(a_sold_out_flag_answers_without_redis_or_the_database);

async fn a_sold_out_flag_answers_without_redis_or_the_database(database: TestDatabase) {
    let (redis, service, voucher) = one_unit_flagged_an_hour(&database).await;
    let base = service.url();
    let http = client();
    assert_eq!(click(&http, &base, voucher, 1).await.status, Some(201));
    assert_eq!(click(&http, &base, voucher, 2).await.status, Some(410));

    // The database has stock again and Redis is gone: a click is still
    // answered sold_out, so it asked neither.
    set_stock(&database, voucher, 1).await;
    drop(redis);
    let answer = click(&http, &base, voucher, 3).await;
    assert_eq!(answer.status, Some(410), "{answer:?}");
    assert_eq!(answer.body["error"], "sold_out");
    let page = metrics_page(&http, &base).await;
    assert!(
        page.contains(seckill::metrics::SOLD_OUT_FLAG_ANSWERS),
        "{page}"
    );
    service.abort();
}

on_every_backend!(a_sold_out_flag_lets_one_click_look_after_the_recheck);

async fn a_sold_out_flag_lets_one_click_look_after_the_recheck(database: TestDatabase) {
    let recheck = Duration::from_secs(2);
    let (_redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            sold_out_recheck: recheck,
            ..Tuning::default()
        },
    )
    .await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 1, open_window()).await;
    assert_eq!(click(&http, &base, voucher, 1).await.status, Some(201));
    let flagged = Instant::now();
    assert_eq!(click(&http, &base, voucher, 2).await.status, Some(410));

    // Stock comes back elsewhere (another instance's cancellation).
    set_stock(&database, voucher, 2).await;
    let answer = click(&http, &base, voucher, 3).await;
    let mut looked = answer.status == Some(201);
    // Within the recheck period (counted from before the flag was set) the
    // flag answers; a slower machine may already be past it.
    if flagged.elapsed() < recheck {
        assert_eq!(answer.status, Some(410), "{answer:?}");
    } else {
        eprintln!("notice: the recheck period passed before the check; not judged");
    }

    // After the period one click looks, finds the stock and clears the flag.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut user = 10;
    while !looked {
        let answer = click(&http, &base, voucher, user).await;
        user += 1;
        match answer.status {
            Some(201) => looked = true,
            Some(410) => assert!(Instant::now() < deadline, "the flag never let a click look"),
            _ => panic!("unexpected answer {answer:?}"),
        }
        if !looked {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Cleared: the next click goes through at once and gets the last unit.
    let answer = click(&http, &base, voucher, user).await;
    assert_eq!(answer.status, Some(201), "{answer:?}");
    service.shutdown().await;
}

on_every_backend!(stock_returned_here_clears_the_sold_out_flag);

async fn stock_returned_here_clears_the_sold_out_flag(database: TestDatabase) {
    // A recheck of an hour: only the cancellation can clear the flag.
    let (_redis, service, voucher) = one_unit_flagged_an_hour(&database).await;
    let base = service.url();
    let http = client();
    let bought = click(&http, &base, voucher, 1).await;
    let order = bought.order_id().expect("an order");
    assert_eq!(click(&http, &base, voucher, 2).await.status, Some(410));

    let (status, _, body) = post(
        http.post(format!("{base}/orders/{order}/cancel"))
            .header("X-User-Id", "1"),
    )
    .await;
    assert_eq!(
        (status, body["status"].clone()),
        (StatusCode::OK, json!("cancelled"))
    );
    let answer = click(&http, &base, voucher, 3).await;
    assert_eq!(answer.status, Some(201), "{answer:?}");
    service.shutdown().await;
}

/// A `--lock-wait` too long to represent as an instant (humantime reads
/// "600000000000years") never runs out: an order on a free user's lock is
/// placed. (The grab added the wait to the clock and panicked on every
/// request.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_too_long_to_represent_never_runs_out() {
    let database = sqlite().await;
    let (_redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            lock_wait: Duration::MAX,
            ..Tuning::default()
        },
    )
    .await;
    let base = service.url();
    let http = client();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let (status, _, body) = post(
        http.post(order_url(&base, voucher))
            .header("X-User-Id", "9")
            .header("Idempotency-Key", "forever"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    service.shutdown().await;
}

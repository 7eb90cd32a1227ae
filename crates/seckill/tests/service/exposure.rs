//! What strangers can do: nothing they send without signing in is kept in
//! Redis, other sites' pages change nothing, and an idempotency key keeps
//! only answers that stay true.

use reqwest::StatusCode;
use seckill::api::auth::AuthConfig;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};

use crate::on_every_backend;
use crate::support::{
    Backend, TestDatabase, click, client, config, create_voucher, open_window, redis_and_instance,
};

const SECRET: &str = "a secret for the tests, 32 bytes or more";

async fn sqlite() -> TestDatabase {
    TestDatabase::create(Backend::Sqlite, "exposure")
        .await
        .expect("SQLite")
}

/// How many idempotency records Redis holds.
async fn idempotency_records(redis: &testkit::RedisServer) -> usize {
    let mut conn = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("{seckill}:idem:*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    keys.len()
}

fn user_token(user: i64) -> String {
    let claims = json!({"sub": user.to_string(), "exp": chrono::Utc::now().timestamp() + 3600});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("token")
}

/// An instance as deployed: users by JWT, on every interface, with an
/// admin token; and its URL on the loopback.
async fn deployed(
    redis: &testkit::RedisServer,
    database: &TestDatabase,
) -> (seckill::serve::Service, String) {
    let mut exposed = config(
        &redis.url(),
        &database.url,
        StrategyKind::RedisLock,
        1,
        false,
    );
    exposed.listen = "0.0.0.0:0".parse().expect("address");
    let service = seckill::serve::start_tuned(
        exposed,
        Tuning {
            auth: AuthConfig::Jwt {
                secret: SECRET.to_owned(),
            },
            admin_token: Some("the admin token".to_owned()),
            ..Tuning::default()
        },
    )
    .await
    .expect("instance starts");
    let base = format!("http://127.0.0.1:{}", service.addr().port());
    (service, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_of_strangers_leave_nothing_in_redis() {
    let database = sqlite().await;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    // As deployed: users by JWT, on every interface, with an admin token.
    let (service, base) = deployed(&redis, &database).await;
    let long_path = format!("/{}", "x".repeat(60_000));
    let strangers = [
        ("a made-up path", format!("{base}/no/such/path"), None),
        ("a made-up long path", format!("{base}{long_path}"), None),
        (
            "an order without a token",
            format!("{base}/vouchers/1/orders"),
            None,
        ),
        (
            "an order with a forged token",
            format!("{base}/vouchers/1/orders"),
            Some("Bearer a.b.c"),
        ),
        (
            "a voucher with a wrong admin token",
            format!("{base}/vouchers"),
            Some("Bearer guessed"),
        ),
        (
            "a dead-letter replay without a token",
            format!("{base}/admin/dead-letters/replay"),
            None,
        ),
    ];
    for round in 0..20 {
        for (case, url, authorization) in &strangers {
            let mut request = http
                .post(url)
                .header("Idempotency-Key", format!("stranger-{round}"));
            if let Some(authorization) = authorization {
                request = request.header("Authorization", *authorization);
            }
            let status = request.send().await.expect("an answer").status();
            assert!(status.is_client_error(), "{case}: {status}");
        }
    }
    assert_eq!(
        idempotency_records(&redis).await,
        0,
        "records of unidentified callers"
    );

    // A signed-in user's key is kept, as before.
    let voucher = {
        let created = http
            .post(format!("{base}/vouchers"))
            .bearer_auth("the admin token")
            .json(&json!({"title": "t", "stock": 5,
                "begin_at": open_window().0.to_rfc3339(), "end_at": open_window().1.to_rfc3339()}))
            .send()
            .await
            .expect("POST /vouchers");
        assert_eq!(created.status(), StatusCode::CREATED);
        created.json::<Value>().await.expect("JSON")["id"]
            .as_i64()
            .expect("id")
    };
    let placed = http
        .post(format!("{base}/vouchers/{voucher}/orders"))
        .bearer_auth(user_token(7))
        .header("Idempotency-Key", "mine")
        .send()
        .await
        .expect("order");
    assert_eq!(placed.status(), StatusCode::CREATED);
    assert_eq!(idempotency_records(&redis).await, 1);
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_sites_pages_cannot_create_vouchers_or_replay_dead_letters() {
    let database = sqlite().await;
    let http = client();
    // On loopback with no token: the local admin may, other sites may not.
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::Reserve, Tuning::default()).await;
    let base = service.url();
    let (begin_at, end_at) = open_window();
    let voucher = json!({"title": "t", "stock": 9_223_372_036_854_775_807_i64,
        "begin_at": begin_at.to_rfc3339(), "end_at": end_at.to_rfc3339()})
    .to_string();
    let post = |path: &str, content_type: Option<&str>, origin: Option<&str>| {
        let mut request = http.post(format!("{base}{path}")).body(voucher.clone());
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        async move {
            let response = request.send().await.expect("an answer");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let refusals = [
        (
            "a text/plain form",
            "/vouchers",
            Some("text/plain"),
            None,
            415,
        ),
        (
            "a urlencoded form",
            "/vouchers",
            Some("application/x-www-form-urlencoded"),
            None,
            415,
        ),
        ("no Content-Type", "/vouchers", None, None, 415),
        (
            "JSON from another site",
            "/vouchers",
            Some("application/json"),
            Some("http://evil.example"),
            403,
        ),
        (
            "a replay from another site",
            "/admin/dead-letters/replay",
            Some("text/plain"),
            Some("http://evil.example"),
            403,
        ),
        (
            "a replay from a sandboxed page",
            "/admin/dead-letters/replay",
            None,
            Some("null"),
            403,
        ),
    ];
    for (case, path, content_type, origin, expected) in refusals {
        let (status, body) = post(path, content_type, origin).await;
        assert_eq!(status.as_u16(), expected, "{case}: {body}");
        assert!(body["error"].is_string(), "{case}: {body}");
    }
    let listed: Value = http
        .get(format!("{base}/vouchers"))
        .send()
        .await
        .expect("GET /vouchers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(listed["vouchers"], json!([]), "nothing was created");
    // The shop's own page (same origin) still works.
    let own = format!("http://{}", service.addr());
    let (status, body) = post("/vouchers", Some("application/json"), Some(&own)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_does_not_keep_a_sold_out_that_stopped_being_true() {
    let database = sqlite().await;
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let http = client();
    let base = service.url();
    let voucher = create_voucher(&http, &base, 1, open_window()).await;
    let bought = click(&http, &base, voucher, 1).await;
    let order = bought.order_id().expect("user 1 bought the last unit");
    let keyed = || {
        http.post(format!("{base}/vouchers/{voucher}/orders"))
            .header("X-User-Id", "2")
            .header("Idempotency-Key", "grab-1")
            .send()
    };
    let first = keyed().await.expect("click");
    assert_eq!(first.status(), StatusCode::GONE);
    // The unit comes back: the same click with the same key now buys it.
    let cancelled = http
        .post(format!("{base}/orders/{order}/cancel"))
        .header("X-User-Id", "1")
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancelled.status(), StatusCode::OK);
    let again = keyed().await.expect("click");
    assert!(
        again.headers().get("idempotent-replayed").is_none(),
        "the earlier sold_out was replayed"
    );
    assert_eq!(again.status(), StatusCode::CREATED);
    // That answer stays true, and is kept.
    let replayed = keyed().await.expect("click");
    assert_eq!(replayed.status(), StatusCode::CREATED);
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_read_by_their_buyer_and_the_admin_only() {
    let database = sqlite().await;
    let redis = testkit::RedisServer::start().expect("redis-server");
    let http = client();
    let (service, base) = deployed(&redis, &database).await;
    let (begin_at, end_at) = open_window();
    let created = http
        .post(format!("{base}/vouchers"))
        .bearer_auth("the admin token")
        .json(&json!({"title": "t", "stock": 5,
            "begin_at": begin_at.to_rfc3339(), "end_at": end_at.to_rfc3339()}))
        .send()
        .await
        .expect("POST /vouchers");
    let voucher = created.json::<Value>().await.expect("JSON")["id"]
        .as_i64()
        .expect("id");
    let placed: Value = http
        .post(format!("{base}/vouchers/{voucher}/orders"))
        .bearer_auth(user_token(7))
        .send()
        .await
        .expect("order")
        .json()
        .await
        .expect("JSON");
    let order = placed["order_id"].as_i64().expect("order id");
    let read = |url: String, bearer: Option<String>| {
        let mut request = http.get(url);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        async move { request.send().await.expect("an answer").status().as_u16() }
    };
    let order_url = format!("{base}/orders/{order}");
    let list_url = format!("{base}/vouchers/{voucher}/orders");
    let admin = Some("the admin token".to_owned());
    let cases = [
        ("the order, anonymous", order_url.clone(), None, 401),
        (
            "the order, another user",
            order_url.clone(),
            Some(user_token(8)),
            404,
        ),
        (
            "the order, its buyer",
            order_url.clone(),
            Some(user_token(7)),
            200,
        ),
        ("the order, the admin", order_url, admin.clone(), 200),
        ("the buyers, anonymous", list_url.clone(), None, 401),
        (
            "the buyers, a user",
            list_url.clone(),
            Some(user_token(7)),
            401,
        ),
        ("the buyers, the admin", list_url, admin, 200),
    ];
    for (case, url, bearer, expected) in cases {
        assert_eq!(read(url, bearer).await, expected, "{case}");
    }
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_lists_come_in_pages() {
    let database = sqlite().await;
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let http = client();
    let base = service.url();
    let voucher = create_voucher(&http, &base, 5, open_window()).await;
    let mut placed = Vec::new();
    for user in 1..=5 {
        placed.push(
            click(&http, &base, voucher, user)
                .await
                .order_id()
                .expect("order"),
        );
    }
    let page = |query: String| {
        let url = format!("{base}/vouchers/{voucher}/orders{query}");
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.expect("an answer");
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let mut listed = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let (status, body) = page(query.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["count"], 5, "{body}");
        let orders = body["orders"].as_array().expect("orders");
        assert!(orders.len() <= 2, "{body}");
        listed.extend(
            orders
                .iter()
                .map(|order| order["order_id"].as_i64().expect("id")),
        );
        match body["next"].as_i64() {
            Some(next) => query = format!("?limit=2&after={next}"),
            None => break,
        }
    }
    placed.sort_unstable();
    assert_eq!(listed, placed, "every order once, by id");
    let (status, body) = page("?limit=0".to_owned()).await;
    assert_eq!(
        (status, body["count"].clone(), body["orders"].clone()),
        (200, json!(5), json!([]))
    );
    for bad in ["?limit=1001", "?limit=-1", "?after=x"] {
        let (status, body) = page(bad.to_owned()).await;
        assert_eq!(
            (status, body["error"].clone()),
            (400, json!("bad_request")),
            "{bad}"
        );
    }
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_header_and_idle_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let database = sqlite().await;
    let (_redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            header_timeout: std::time::Duration::from_secs(1),
            ..Tuning::default()
        },
    )
    .await;
    // Half of them start a request and never finish its headers; the
    // others connect and say nothing.
    let mut held = Vec::new();
    for n in 0..20 {
        let mut stream = tokio::net::TcpStream::connect(service.addr())
            .await
            .expect("connect");
        if n % 2 == 0 {
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: shop\r\nX-Slow: ")
                .await
                .expect("a partial request");
        }
        held.push(stream);
    }
    // The server must hang up on each (EOF, or a 408 then EOF, or a reset),
    // well before this generous bound.
    for (n, mut stream) in held.into_iter().enumerate() {
        let closed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink).await;
        })
        .await;
        assert!(closed.is_ok(), "connection {n} still open after 20 s");
    }
    // A normal client is served as ever.
    let health = client()
        .get(format!("{}/health", service.url()))
        .send()
        .await
        .expect("GET /health");
    assert_eq!(health.status(), StatusCode::OK);
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_may_not_be_framed_sniffed_or_run_other_scripts() {
    let database = sqlite().await;
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let page = client()
        .get(format!("{}/", service.url()))
        .send()
        .await
        .expect("GET /");
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header("x-frame-options"), "DENY");
    assert_eq!(header("x-content-type-options"), "nosniff");
    let policy = header("content-security-policy");
    for directive in [
        "default-src 'none'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(
            policy.contains(directive),
            "{directive} missing: {policy:?}"
        );
    }
    // The page's own inline script is the one script allowed, by its hash.
    let html = page.text().await.expect("the page");
    let script = html
        .split_once("<script>")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .map(|(inside, _)| inside)
        .expect("an inline script");
    let digest = <sha2::Sha256 as sha2::Digest>::digest(script.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    let named = policy
        .split("script-src 'sha256-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_default();
    assert_eq!(hex_of_base64(named), hex, "script hash in {policy:?}");
    service.shutdown().await;
}

/// Decodes standard base64 to hex (test-side, independent of the server's encoder).
fn hex_of_base64(text: &str) -> String {
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = String::new();
    for c in text.chars().filter(|c| *c != '=') {
        bits = (bits << 6) | alphabet.find(c).expect("base64") as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push_str(&format!("{:02x}", (bits >> count) & 0xff));
        }
    }
    out
}

on_every_backend!(titles_with_control_characters_are_refused);

/// A NUL (which PostgreSQL refuses), an escape sequence (which colours a
/// terminal showing it), a line break: 400 with a message, on every backend.
async fn titles_with_control_characters_are_refused(database: TestDatabase) {
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let http = client();
    let (begin_at, end_at) = open_window();
    for title in ["nul\u{0}here", "\u{1b}[31mred\u{1b}[0m", "two\nlines"] {
        let answer = http
            .post(format!("{}/vouchers", service.url()))
            .json(&json!({"title": title, "stock": 1,
                "begin_at": begin_at.to_rfc3339(), "end_at": end_at.to_rfc3339()}))
            .send()
            .await
            .expect("an answer");
        let status = answer.status();
        let body: Value = answer.json().await.expect("JSON");
        assert_eq!(status, StatusCode::BAD_REQUEST, "{title:?}: {body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("control"),
            "{title:?}: {body}"
        );
    }
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessable_jwt_secret_is_refused_at_start() {
    let database = sqlite().await;
    let mut exposed = config(
        "redis://127.0.0.1:1",
        &database.url,
        StrategyKind::RedisLock,
        1,
        false,
    );
    exposed.listen = "0.0.0.0:0".parse().expect("address");
    let refused = seckill::serve::start_tuned(
        exposed,
        Tuning {
            auth: AuthConfig::Jwt {
                secret: "x".to_owned(),
            },
            ..Tuning::default()
        },
    )
    .await;
    let Err(error) = refused else {
        panic!("a 1-byte secret must stop the start");
    };
    assert!(error.to_string().contains("at least 32"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_gets_a_bounded_number_of_idempotency_keys_a_day() {
    let database = sqlite().await;
    let (redis, service) = redis_and_instance(
        &database,
        StrategyKind::RedisLock,
        Tuning {
            idempotency_keys_per_day: 3,
            ..Tuning::default()
        },
    )
    .await;
    let http = client();
    let base = service.url();
    let voucher = create_voucher(&http, &base, 10, open_window()).await;
    let keyed = |user: i64, key: &str| {
        let request = http
            .post(format!("{base}/vouchers/{voucher}/orders"))
            .header("X-User-Id", user.to_string())
            .header("Idempotency-Key", key);
        async move {
            let response = request.send().await.expect("an answer");
            let status = response.status();
            let replayed = response.headers().contains_key("idempotent-replayed");
            let retry_after = response.headers().contains_key("retry-after");
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, replayed, retry_after, body)
        }
    };
    for key in ["k1", "k2", "k3"] {
        let (status, _, _, body) = keyed(1, key).await;
        assert!(
            status == StatusCode::CREATED || status == StatusCode::CONFLICT,
            "{body}"
        );
    }
    let (status, _, retry_after, body) = keyed(1, "k4").await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "a fourth key: {body}"
    );
    assert_eq!(body["error"], "rate_limited");
    assert!(retry_after, "429 without Retry-After");
    // Replays of its keys still answer; another user has keys of their own.
    let (status, replayed, _, _) = keyed(1, "k1").await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true));
    let (status, _, _, body) = keyed(2, "k4").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // User 1's three records and user 2's one: nothing kept for the refused key.
    assert_eq!(idempotency_records(&redis).await, 4);
    service.shutdown().await;
}

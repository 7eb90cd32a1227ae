//! Random HTTP input: requests drawn from proptest strategies (methods,
//! paths with good and bad ids, user-id headers, bodies from well-formed
//! vouchers to junk bytes) thrown at two instances. Every answer must be
//! below 500 and, when it is an error, a JSON error body (`error`, and
//! `message` when there is one); afterwards the
//! shop still answers and no voucher is oversold or sold twice to a user.
//!
//! `SECKILL_FUZZ_REQUESTS` sets how many requests (default 300 per backend;
//! docs/TESTING.md gives the long run), `SECKILL_FUZZ_SEED` the seed.

use std::collections::HashSet;

use futures_util::StreamExt;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reqwest::Method;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};

use crate::on_every_backend;
use crate::support::{TestDatabase, client, create_voucher, open_window, redis_and_instances};

on_every_backend!(random_requests);

/// One generated request.
#[derive(Debug, Clone)]
struct Request {
    method: Method,
    path: String,
    user_id: Option<String>,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
}

/// A voucher id in a path: mostly real ones, then every kind of wrong.
fn id_text(real: Vec<i64>) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(real).prop_map(|id| id.to_string()),
        1 => any::<i64>().prop_map(|id| id.to_string()),
        1 => proptest::sample::select(vec![
            "0", "-1", "abc", "1e3", "1.5", " 1", "%20", "%00", "é", "99999999999999999999999", "",
        ])
        .prop_map(str::to_owned),
        1 => "[a-zA-Z0-9%._~-]{0,40}",
    ]
}

fn path(real: Vec<i64>) -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("/".to_owned()),
        1 => Just("/health".to_owned()),
        1 => Just("/metrics".to_owned()),
        2 => Just("/vouchers".to_owned()),
        3 => id_text(real.clone()).prop_map(|id| format!("/vouchers/{id}")),
        6 => id_text(real).prop_map(|id| format!("/vouchers/{id}/orders")),
        1 => "/[a-z/]{0,20}",
    ]
}

fn user_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        1 => Just(None),
        4 => (1i64..40).prop_map(|id| Some(id.to_string())),
        1 => any::<i64>().prop_map(|id| Some(id.to_string())),
        1 => "[ -~]{0,24}".prop_map(Some),
    ]
}

/// A JSON value of any shape, for fields that expect one.
fn json_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |number| number.is_finite())
            .prop_map(Value::from),
        "\\PC{0,30}".prop_map(Value::from),
        Just(json!([1, "two"])),
        Just(json!({"nested": {}})),
    ]
}

fn timestamp() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (-600i64..600).prop_map(|minutes| {
            Value::from((chrono::Utc::now() + chrono::Duration::minutes(minutes)).to_rfc3339())
        }),
        1 => json_value(),
    ]
}

/// A voucher body: well-formed, with odd values, with fields missing.
fn voucher_body() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![3 => "\\PC{0,40}".prop_map(Value::from), 1 => json_value()],
        prop_oneof![3 => (-5i64..6).prop_map(Value::from), 1 => json_value()],
        timestamp(),
        timestamp(),
        any::<u8>(),
    )
        .prop_map(|(title, stock, begin_at, end_at, drop)| {
            let mut body =
                json!({"title": title, "stock": stock, "begin_at": begin_at, "end_at": end_at});
            let fields = ["title", "stock", "begin_at", "end_at"];
            if let Some(field) = fields.get(usize::from(drop % 8)) {
                body.as_object_mut().expect("object").remove(*field);
            }
            body.to_string().into_bytes()
        })
}

fn body() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        2 => Just(None),
        4 => voucher_body().prop_map(Some),
        1 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        1 => json_value().prop_map(|value| Some(value.to_string().into_bytes())),
    ]
}

fn request(real: Vec<i64>) -> impl Strategy<Value = Request> {
    (
        proptest::sample::select(vec![
            Method::GET,
            Method::POST,
            Method::POST,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
            Method::HEAD,
            Method::OPTIONS,
        ]),
        path(real),
        user_id(),
        proptest::sample::select(vec![Some("application/json"), Some("text/plain"), None]),
        body(),
    )
        .prop_map(|(method, path, user_id, content_type, body)| Request {
            method,
            path,
            user_id,
            content_type,
            body,
        })
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Draws `count` requests from a runner seeded with `seed`.
fn draw(count: u64, seed: u64, real: Vec<i64>) -> Vec<Request> {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = request(real);
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).expect("a request").current())
        .collect()
}

/// Sends one request; returns its status and body.
async fn send(http: &reqwest::Client, base: &str, request: &Request) -> (u16, Vec<u8>) {
    let mut builder = http.request(request.method.clone(), format!("{base}{}", request.path));
    if let Some(user) = &request.user_id {
        builder = builder.header("X-User-Id", user.as_str());
    }
    if let Some(kind) = request.content_type {
        builder = builder.header("content-type", kind);
    }
    if let Some(body) = &request.body {
        builder = builder.body(body.clone());
    }
    let response = builder
        .send()
        .await
        .unwrap_or_else(|error| panic!("no answer to {request:?}: {error}"));
    let status = response.status().as_u16();
    let body = response
        .bytes()
        .await
        .map(|bytes| bytes.to_vec())
        .unwrap_or_default();
    (status, body)
}

async fn random_requests(database: TestDatabase) {
    let (_redis, services) =
        redis_and_instances(&database, StrategyKind::RedisLock, 2, Tuning::default()).await;
    let bases: Vec<String> = services.iter().map(|service| service.url()).collect();
    let http = client();
    let stock = 3;
    let mut real = Vec::new();
    for _ in 0..2 {
        real.push(create_voucher(&http, &bases[0], stock, open_window()).await);
    }
    let count = env_number("SECKILL_FUZZ_REQUESTS", 300);
    let seed = env_number("SECKILL_FUZZ_SEED", 0x5EC_C111);
    let requests = draw(count, seed, real.clone());

    let answers: Vec<(Request, u16, Vec<u8>)> =
        futures_util::stream::iter(requests.into_iter().enumerate())
            .map(|(index, request)| {
                let http = http.clone();
                let base = bases[index % bases.len()].clone();
                async move {
                    let (status, body) = send(&http, &base, &request).await;
                    (request, status, body)
                }
            })
            .buffer_unordered(8)
            .collect()
            .await;

    let mut orders_placed = 0;
    for (request, status, body) in &answers {
        assert!(
            *status < 500,
            "{status} for {request:?} (seed {seed}): {}",
            String::from_utf8_lossy(body)
        );
        if *status >= 400 && request.method != Method::HEAD {
            let error: Value = serde_json::from_slice(body).unwrap_or_else(|_| {
                panic!(
                    "{status} for {request:?} (seed {seed}) is not a JSON error: {}",
                    String::from_utf8_lossy(body)
                )
            });
            assert!(error["error"].is_string(), "{error} for {request:?}");
            assert!(
                error.get("message").is_none_or(Value::is_string),
                "{error} for {request:?}"
            );
        }
        if matches!(*status, 201 | 202) && request.path.ends_with("/orders") {
            orders_placed += 1;
        }
    }

    // The shop still answers, and no voucher was oversold or sold twice to a user.
    let health = http
        .get(format!("{}/health", bases[1]))
        .send()
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
    let mut sold = 0;
    for id in &real {
        let voucher: Value = http
            .get(format!("{}/vouchers/{id}", bases[0]))
            .send()
            .await
            .expect("voucher")
            .json()
            .await
            .expect("JSON");
        let orders: Value = http
            .get(format!("{}/vouchers/{id}/orders", bases[1]))
            .send()
            .await
            .expect("orders")
            .json()
            .await
            .expect("JSON");
        let listed = orders["orders"].as_array().expect("orders");
        let users: HashSet<i64> = listed
            .iter()
            .map(|order| order["user_id"].as_i64().expect("user_id"))
            .collect();
        assert_eq!(users.len(), listed.len(), "a user bought twice: {orders}");
        let left = voucher["stock"].as_i64().expect("stock");
        assert!(left >= 0, "{voucher}");
        assert_eq!(left + listed.len() as i64, stock, "{voucher} {orders}");
        sold += listed.len();
    }
    eprintln!(
        "fuzz: {count} requests (seed {seed}), {orders_placed} orders placed, {sold} of the two real vouchers' {} sold",
        stock * 2
    );
}

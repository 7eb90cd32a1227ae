//! The HTTP contract: every route, every error status, bad input.

use reqwest::StatusCode;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};

use crate::on_every_backend;
use crate::support::{TestDatabase, client, create_voucher, open_window, redis_and_instance};

on_every_backend!(http_contract);

async fn http_contract(database: TestDatabase) {
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let base = service.url();
    let http = client();

    // Vouchers: create, read, refuse bad bodies.
    let (begin_at, end_at) = open_window();
    let voucher = create_voucher(&http, &base, 2, (begin_at, end_at)).await;
    let shown = get_json(&http, &format!("{base}/vouchers/{voucher}")).await;
    assert_eq!(shown.0, StatusCode::OK);
    assert_eq!(shown.1["id"], voucher);
    assert_eq!(shown.1["title"], "100 off");
    assert_eq!(shown.1["stock"], 2);
    let shown_begin = chrono::DateTime::parse_from_rfc3339(shown.1["begin_at"].as_str().unwrap())
        .expect("begin_at is RFC 3339");
    assert_eq!(shown_begin.timestamp_millis(), begin_at.timestamp_millis());
    assert!(shown.1["end_at"].as_str().unwrap().ends_with('Z'));

    let window = json!({"begin_at": "2025-01-01T00:00:00Z", "end_at": "2025-01-02T00:00:00Z"});
    let with = |extra: Value| {
        let mut body = window.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body.to_string()
    };
    let bad_bodies = [
        "not json".to_owned(),
        "{}".to_owned(),
        json!({"title": "x", "stock": 1}).to_string(),
        with(json!({"stock": 1})),
        with(json!({"title": "x", "stock": -1})),
        with(json!({"title": "", "stock": 1})),
        with(json!({"title": "x", "stock": "many"})),
        json!({"title": "x", "stock": 1, "begin_at": "yesterday", "end_at": "2025-01-02T00:00:00Z"})
            .to_string(),
        json!({"title": "x", "stock": 1, "begin_at": "2025-01-01T00:00:00Z", "end_at": "2025-13-02T00:00:00Z"})
            .to_string(),
        json!({"title": "x", "stock": 1, "begin_at": "2025-01-02T00:00:00Z", "end_at": "2025-01-01T00:00:00Z"})
            .to_string(),
    ];
    for body in bad_bodies {
        let response = http
            .post(format!("{base}/vouchers"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("POST /vouchers");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
        let answer: Value = response.json().await.expect("JSON error");
        assert_eq!(answer["error"], "bad_request", "{body}");
        assert!(answer["message"].is_string(), "{body}");
    }

    for path in [
        "/vouchers/999999",
        "/vouchers/abc",
        "/vouchers/999999/orders",
        // Percent-encoding that does not decode to UTF-8 names no voucher either.
        "/vouchers/%D2",
        "/vouchers/%D2/orders",
        "/nowhere",
    ] {
        let (status, body) = get_json(&http, &format!("{base}{path}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(body["error"], "not_found", "{path}");
    }

    let (status, body) = {
        let response = http
            .delete(format!("{base}/vouchers/{voucher}"))
            .send()
            .await
            .expect("DELETE");
        (
            response.status(),
            response.json::<Value>().await.expect("JSON"),
        )
    };
    assert_eq!(
        (status, body),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"error": "method_not_allowed"})
        )
    );
    // A fresh client: the server closes a connection whose body it refused,
    // and a pooled client could pick that connection for the next request.
    let too_big = reqwest::Client::new()
        .post(format!("{base}/vouchers"))
        .header("Content-Type", "application/json")
        .body(vec![b' '; 3 * 1024 * 1024])
        .send()
        .await
        .expect("POST a large body");
    assert_eq!(too_big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        too_big.json::<Value>().await.expect("JSON")["error"],
        "payload_too_large"
    );

    // Orders: user id checks, then the answers of the strategy.
    let order_url = format!("{base}/vouchers/{voucher}/orders");
    let missing = http.post(&order_url).send().await.expect("POST");
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        missing.json::<Value>().await.unwrap()["error"],
        "bad_user_id"
    );
    for bad in ["abc", "-5", "0", "1.5", "99999999999999999999", ""] {
        let (status, body) = post_order(&http, &order_url, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "X-User-Id {bad:?}");
        assert_eq!(body["error"], "bad_user_id", "X-User-Id {bad:?}");
    }
    let (status, body) = post_order(&http, &format!("{base}/vouchers/999999/orders"), "1").await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );

    let (status, body) = post_order(&http, &order_url, "1001").await;
    assert_eq!(status, StatusCode::CREATED);
    let order_id = body["order_id"].as_i64().expect("order_id");
    let (status, body) = post_order(&http, &order_url, "1001").await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::CONFLICT, json!("already_ordered"))
    );
    let (status, body) = post_order(&http, &order_url, "1002").await;
    assert_eq!(status, StatusCode::CREATED);
    let second_order_id = body["order_id"].as_i64().expect("order_id");
    let (status, body) = post_order(&http, &order_url, "1003").await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::GONE, json!("sold_out"))
    );

    let (status, listed) = get_json(&http, &order_url).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        listed,
        json!({"count": 2, "orders": [
            {"order_id": order_id, "user_id": 1001},
            {"order_id": second_order_id, "user_id": 1002},
        ], "next": null})
    );
    let (_, shown) = get_json(&http, &format!("{base}/vouchers/{voucher}")).await;
    assert_eq!(shown["stock"], 0);

    // Operations.
    let (status, health) = get_json(&http, &format!("{base}/health")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        health,
        json!({"status": "ok", "instance": 1, "strategy": "redis-lock"})
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(metrics.status(), StatusCode::OK);
    let text = metrics.text().await.expect("text");
    assert!(text.contains("seckill_orders_created_total"), "{text}");
    assert!(text.contains("seckill_order_rejections_total"), "{text}");
    assert!(text.contains("reason=\"sold_out\""), "{text}");
    assert!(text.contains("redlatch_acquisitions_total"), "{text}");
    let page = http.get(format!("{base}/")).send().await.expect("GET /");
    assert_eq!(page.status(), StatusCode::OK);
    let content_type = page.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/html"), "{content_type}");

    service.shutdown().await;
}

on_every_backend!(voucher_list);

/// `GET /vouchers`: empty at first, then every voucher as `GET /vouchers/{id}`
/// shows it, ordered by id; past 100 vouchers, the newest 100.
async fn voucher_list(database: TestDatabase) {
    let (_redis, service) =
        redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
    let base = service.url();
    let http = client();
    let list_url = format!("{base}/vouchers");

    assert_eq!(
        get_json(&http, &list_url).await,
        (StatusCode::OK, json!({"vouchers": []}))
    );

    let first = create_voucher(&http, &base, 2, open_window()).await;
    let second = create_voucher(&http, &base, 5, open_window()).await;
    assert!(first < second);
    let (status, listed) = get_json(&http, &list_url).await;
    assert_eq!(status, StatusCode::OK);
    let mut shown = Vec::new();
    for id in [first, second] {
        let (status, voucher) = get_json(&http, &format!("{base}/vouchers/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        shown.push(voucher);
    }
    assert_eq!(listed, json!({ "vouchers": shown }));
    assert_eq!(listed["vouchers"][1]["stock"], 5);

    // The stock is live: an order shows at once.
    let (status, _) = post_order(&http, &format!("{base}/vouchers/{first}/orders"), "1").await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, listed) = get_json(&http, &list_url).await;
    assert_eq!(listed["vouchers"][0]["stock"], 1);

    // The cap: 101 vouchers list as the newest 100, still oldest first.
    let mut newest = second;
    for _ in 0..99 {
        newest = create_voucher(&http, &base, 1, open_window()).await;
    }
    let (status, listed) = get_json(&http, &list_url).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<i64> = listed["vouchers"]
        .as_array()
        .expect("vouchers array")
        .iter()
        .map(|voucher| voucher["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids.len(), 100);
    assert_eq!((ids[0], ids[99]), (second, newest));
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");

    service.shutdown().await;
}

async fn get_json(http: &reqwest::Client, url: &str) -> (StatusCode, Value) {
    let response = http.get(url).send().await.expect("GET");
    let status = response.status();
    (status, response.json().await.expect("JSON body"))
}

async fn post_order(http: &reqwest::Client, url: &str, user: &str) -> (StatusCode, Value) {
    let response = http
        .post(url)
        .header("X-User-Id", user)
        .send()
        .await
        .expect("POST order");
    let status = response.status();
    (status, response.json().await.expect("JSON body"))
}

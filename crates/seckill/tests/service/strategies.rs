//! Every strategy, one instance at a time, on the normal schema: the sale
//! window (403 not_started / ended), then order, second order (409), sold
//! out (410), and the order in the database.

use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use seckill::db::Db;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::json;

use crate::on_every_backend;
use crate::support::{TestDatabase, click, client, create_voucher, open_window, start_instances};

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
        let stock = db
            .voucher(voucher)
            .await
            .expect("voucher")
            .expect("exists")
            .stock;
        assert_eq!(stock, 0, "{strategy}");
        service.shutdown().await;
    }
    db.close().await;
}

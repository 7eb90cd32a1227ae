//! Redis or the database failing gives JSON 503/500 answers, never a panic
//! or a dropped connection.

use reqwest::StatusCode;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use sqlx::{Connection, Executor};

use crate::support::{
    Backend, click, client, create_voucher, on_backend, open_window, start_instances,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_for_every_strategy() {
    on_backend(Backend::Sqlite, "redis_down", |database| async move {
        let mut redis = testkit::RedisServer::start().expect("redis-server");
        let http = client();
        let mut running = Vec::new();
        for strategy in [StrategyKind::RedisLock, StrategyKind::Reserve] {
            let service =
                start_instances(&redis.url(), &database.url, strategy, 1, Tuning::default())
                    .await
                    .remove(0);
            let voucher = create_voucher(&http, &service.url(), 10, open_window()).await;
            running.push((strategy, service, voucher));
        }
        redis.kill().expect("kill redis-server");
        for (strategy, service, voucher) in &running {
            let asked = std::time::Instant::now();
            let answer = click(&http, &service.url(), *voucher, 7).await;
            eprintln!("{strategy}: answered in {:?}", asked.elapsed());
            assert_eq!(
                answer.status,
                Some(StatusCode::SERVICE_UNAVAILABLE.as_u16()),
                "{strategy}: {answer:?}"
            );
            assert_eq!(
                answer.body["error"], "redis_unavailable",
                "{strategy}: {answer:?}"
            );
            assert!(answer.body["message"].is_string(), "{strategy}");
        }
        for (_, service, _) in running {
            service.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_database_answers_500() {
    on_backend(Backend::Sqlite, "broken_database", |database| async move {
        let redis = testkit::RedisServer::start().expect("redis-server");
        let service = start_instances(
            &redis.url(),
            &database.url,
            StrategyKind::RedisLock,
            1,
            Tuning::default(),
        )
        .await
        .remove(0);
        let http = client();
        let voucher = create_voucher(&http, &service.url(), 10, open_window()).await;
        let mut conn = sqlx::SqliteConnection::connect(&database.url)
            .await
            .expect("sqlite");
        conn.execute("DROP TABLE voucher_order")
            .await
            .expect("drop table");
        conn.close().await.ok();
        let answer = click(&http, &service.url(), voucher, 7).await;
        assert_eq!(answer.status, Some(500), "{answer:?}");
        assert_eq!(answer.body["error"], "database_error", "{answer:?}");
        let listing = http
            .get(format!("{}/vouchers/{voucher}/orders", service.url()))
            .send()
            .await
            .expect("GET orders");
        assert_eq!(listing.status(), StatusCode::INTERNAL_SERVER_ERROR);
        service.shutdown().await;
    })
    .await;
}

//! Redis or the database failing gives JSON 503/500 answers, never a panic
//! or a dropped connection.

use reqwest::StatusCode;
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use sqlx::{Connection, Executor};

use crate::support::{
    Backend, click, client, create_voucher, on_backend, open_window, redis_and_instance,
    start_instances,
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
            let waited = asked.elapsed();
            eprintln!("{strategy}: answered in {waited:?}");
            // Redis refuses connections: no strategy may spend longer than
            // one response timeout (3 s) finding that out.
            assert!(
                waited < std::time::Duration::from_secs(3),
                "{strategy}: answered after {waited:?}"
            );
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
            let retry_after = http
                .post(format!("{}/vouchers/{voucher}/orders", service.url()))
                .header("X-User-Id", "8")
                .send()
                .await
                .expect("an answer");
            assert_eq!(retry_after.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(
                retry_after.headers().contains_key("retry-after"),
                "{strategy}: a 503 without Retry-After"
            );
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
        let (_redis, service) =
            redis_and_instance(&database, StrategyKind::RedisLock, Tuning::default()).await;
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
        // The database's own words (table names, SQL) stay in the log.
        let message = answer.body["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("voucher_order") && !message.contains("no such table"),
            "the database's message reached the client: {message}"
        );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_settings_file_is_checked_at_start_and_followed() {
    on_backend(Backend::Sqlite, "lock_config", |database| async move {
        let redis = testkit::RedisServer::start().expect("redis-server");
        // An instance with `--lock-config path`.
        let start_with_lock_settings = |path| {
            seckill::serve::start_tuned(
                crate::support::config(
                    &redis.url(),
                    &database.url,
                    StrategyKind::RedisLock,
                    1,
                    false,
                ),
                Tuning {
                    lock_settings: Some(path),
                    ..Tuning::default()
                },
            )
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[lock]\ndefault_lease = \"banana\"\n").expect("write");
        let refused = start_with_lock_settings(bad).await;
        let Err(error) = refused else {
            panic!("a bad lock settings file must stop the start");
        };
        assert!(error.to_string().contains("--lock-config"), "{error}");

        // A good file: the per-user locks take its key prefix.
        let good = dir.path().join("locks.toml");
        std::fs::write(&good, "[lock]\nkey_prefix = \"shop1:\"\n").expect("write");
        let service = start_with_lock_settings(good)
            .await
            .expect("starts with a good file");
        let http = client();
        let voucher = create_voucher(&http, &service.url(), 10, open_window()).await;
        // Hold the user's lock under the file's prefix: the order must find it held.
        let other = redlatch::Client::connect(&redis.url())
            .await
            .expect("lock client");
        let held = other
            .lock(format!("shop1:seckill:order:{voucher}:7"))
            .acquire()
            .await
            .expect("hold the user's lock");
        let answer = click(&http, &service.url(), voucher, 7).await;
        assert_eq!(
            answer.status,
            Some(StatusCode::CONFLICT.as_u16()),
            "{answer:?}"
        );
        assert_eq!(answer.body["error"], "in_progress", "{answer:?}");
        held.release().await.expect("release");
        let answer = click(&http, &service.url(), voucher, 7).await;
        assert_eq!(
            answer.status,
            Some(StatusCode::CREATED.as_u16()),
            "{answer:?}"
        );
        service.shutdown().await;
    })
    .await;
}

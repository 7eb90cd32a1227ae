//! Liveness and readiness: ready names the dependency that does not answer,
//! and turns not ready while a graceful shutdown drains.

use std::time::Duration;

use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;
use serde_json::Value;

use crate::on_every_backend;
use crate::support::{TestDatabase, client, start_instances};

on_every_backend!(ready_names_what_fails_and_turns_off_while_draining);

async fn get(http: &reqwest::Client, url: &str) -> Option<(u16, Value)> {
    let response = http.get(url).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.unwrap_or(Value::Null)))
}

async fn ready_names_what_fails_and_turns_off_while_draining(database: TestDatabase) {
    let http = client();
    // Draining: a shutdown with --drain keeps serving, not ready, for a while.
    let redis = testkit::RedisServer::start().expect("redis-server");
    let tuning = Tuning {
        drain: Duration::from_secs(2),
        ..Tuning::default()
    };
    let mut instances = start_instances(
        &redis.url(),
        &database.url,
        StrategyKind::RedisLock,
        1,
        tuning,
    )
    .await;
    let base = instances[0].url();
    let ready = get(&http, &format!("{base}/health/ready")).await;
    assert_eq!(ready, Some((200, serde_json::json!({"status": "ready"}))));
    let live = get(&http, &format!("{base}/health/live")).await;
    assert_eq!(live.map(|(status, _)| status), Some(200));
    let stopping = tokio::spawn(instances.remove(0).shutdown());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = get(&http, &format!("{base}/health/ready")).await;
        if let Some((503, body)) = &answer {
            assert_eq!(body["failing"], serde_json::json!(["draining"]), "{body}");
            break;
        }
        assert_eq!(
            answer.as_ref().map(|(status, _)| *status),
            Some(200),
            "{answer:?}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reported draining"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stopping.await.expect("shutdown");

    // Redis gone: ready says so, live still answers.
    let redis = testkit::RedisServer::start().expect("redis-server");
    let instances = start_instances(
        &redis.url(),
        &database.url,
        StrategyKind::RedisLock,
        1,
        Tuning::default(),
    )
    .await;
    let base = instances[0].url();
    drop(redis);
    let (status, body) = get(&http, &format!("{base}/health/ready"))
        .await
        .expect("ready answers");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["failing"], serde_json::json!(["redis"]), "{body}");
    let live = get(&http, &format!("{base}/health/live")).await;
    assert_eq!(live.map(|(status, _)| status), Some(200));
    for instance in instances {
        instance.abort();
    }
}

//! Order ids: unique across instances and workers, increasing per caller.

use std::collections::HashSet;

use seckill::id_worker::{IdWorker, day_key, decompose, timestamp_of};
use seckill::serve::Tuning;
use seckill::strategy::StrategyKind;

use crate::support::{
    Backend, click, client, create_voucher, on_backend, open_window, redis_and_instances,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_workers_hand_out_unique_increasing_ids() {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let connect = || async {
        IdWorker::new(
            redlatch::Client::connect(&redis.url())
                .await
                .expect("redis connection")
                .redis_connection(),
        )
    };
    let (first, second) = (connect().await, connect().await);

    // Sequential calls: strictly increasing, sequence counting up.
    let mut previous = 0;
    for _ in 0..200 {
        let id = first.next_id().await.expect("id");
        assert!(id > previous, "{id} after {previous}");
        previous = id;
    }
    let (_, sequence) = decompose(previous);
    let made_at = timestamp_of(previous).expect("timestamp");
    let counter: u64 = redis::cmd("GET")
        .arg(day_key(made_at))
        .query(&mut redis.conn())
        .expect("GET the day's counter");
    assert_eq!(sequence, counter, "the sequence is the day's INCR counter");
    let drift = (chrono::Utc::now() - made_at).num_seconds().abs();
    assert!(drift <= 2, "id timestamp {made_at} is {drift} s from now");

    // Two workers (two instances) at once: no id twice.
    let calls = (0..1_000).map(|n| {
        let worker = if n % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tokio::spawn(async move { worker.next_id().await.expect("id") })
    });
    let ids: Vec<i64> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|id| id.expect("task"))
        .collect();
    let distinct: HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "duplicate ids");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_ids_are_unique_and_increasing_per_instance() {
    on_backend(
        Backend::Sqlite,
        "order_ids_per_instance",
        |database| async move {
            let (_redis, services) =
                redis_and_instances(&database, StrategyKind::RedisLock, 2, Tuning::default()).await;
            let http = client();
            let voucher = create_voucher(&http, &services[0].url(), 100, open_window()).await;
            let mut per_instance = vec![Vec::new(), Vec::new()];
            for user in 1..=40i64 {
                let instance = (user % 2) as usize;
                let answer = click(&http, &services[instance].url(), voucher, user).await;
                per_instance[instance].push(answer.order_id().expect("201 with an order id"));
            }
            for ids in &per_instance {
                assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
            }
            let all: HashSet<i64> = per_instance.iter().flatten().copied().collect();
            assert_eq!(all.len(), 40);
            for service in services {
                service.shutdown().await;
            }
        },
    )
    .await;
}

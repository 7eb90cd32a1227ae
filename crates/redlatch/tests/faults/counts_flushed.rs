//! The latch's and the semaphore's scripts (their try-sets share
//! `scripts/lib/set_once.lua`) across `SCRIPT FLUSH` and `FUNCTION FLUSH`
//! mid-run: every call reloads what it needs and runs exactly once.

use std::time::Duration;

use redlatch::{CountDownLatch, Semaphore};

use crate::common;

const TASKS: u64 = 4;
const CALLS: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_change_exactly_once_per_call_across_flushes() {
    let server = common::server();
    let lease = redlatch::Settings::DEFAULT_LEASE;
    // One client runs its scripts as functions, the other by EVALSHA.
    let functions = common::client(&server).await;
    let evalsha = common::evalsha_client_at(&server.url(), lease).await;
    let mut admin = common::admin(&server).await;
    let latch = functions.handle::<CountDownLatch>("flushed-latch");
    assert!(latch.try_set_count(TASKS * CALLS).await.unwrap());
    let pool = evalsha.handle::<Semaphore>("flushed-pool");
    assert!(pool.try_set_permits(1).await.unwrap());
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let client = if task % 2 == 0 { &functions } else { &evalsha };
        let latch = client.count_down_latch("flushed-latch");
        let pool = client.semaphore("flushed-pool");
        let fresh = client.clone();
        tasks.push(tokio::spawn(async move {
            for call in 0..CALLS {
                latch.count_down().await.expect("count down across a flush");
                pool.add_permits(1).await.expect("add across a flush");
                // A count set once, by the one call that finds none.
                let name = format!("fresh-{task}-{call}");
                assert!(
                    fresh
                        .handle::<Semaphore>(name.as_str())
                        .try_set_permits(2)
                        .await
                        .expect("try set across a flush")
                );
                assert!(
                    !fresh
                        .handle::<CountDownLatch>(name.as_str())
                        .try_set_count(2)
                        .await
                        .expect("try set across a flush"),
                    "the semaphore's count is there"
                );
            }
        }));
    }
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        for flush in ["SCRIPT", "FUNCTION"] {
            let () = redis::cmd(flush)
                .arg("FLUSH")
                .query_async(&mut admin)
                .await
                .unwrap();
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(latch.await_within(Some(Duration::ZERO)).await.unwrap());
    assert_eq!(
        pool.available_permits().await.unwrap(),
        1 + (TASKS * CALLS) as i64
    );
}

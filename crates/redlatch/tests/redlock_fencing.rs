//! Redlock fencing tokens when the nodes' counters disagree: the token is
//! the highest counter of the nodes acquired, written back to a majority
//! before the guard is handed out, so later majorities see it.

mod redlock_common;

use std::time::Duration;

use redlock_common::{admin, masters, redlock};

const COUNTER: &str = "redisson_lock_token:{rl:fence}";

async fn counter(server: &testkit::RedisServer) -> u64 {
    let value: Option<u64> = redis::cmd("GET")
        .arg(COUNTER)
        .query_async(&mut admin(server).await)
        .await
        .unwrap();
    value.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_written_back_to_a_majority_outlives_the_nodes_that_had_it() {
    let mut masters = masters(5);
    // Masters 0 and 1 have handed out token 100; 2, 3 and 4 lost their counters.
    for server in masters.iter().take(2) {
        let _: () = redis::cmd("SET")
            .arg(COUNTER)
            .arg(100)
            .query_async(&mut admin(server).await)
            .await
            .unwrap();
    }
    let redlock = redlock(&masters, Duration::from_secs(30)).await;
    let lock = redlock.lock("rl:fence");
    let first = lock.acquire().await.expect("acquire");
    assert_eq!(
        first.token(),
        101,
        "the highest counter of the nodes acquired"
    );
    // Only two nodes had 101: it was written back before the guard came out.
    for server in &masters {
        assert!(counter(server).await >= 101);
    }
    first.release().await.expect("release");

    // The nodes that had the high counter die; the three others form the majority.
    masters[0].kill().unwrap();
    masters[1].kill().unwrap();
    let second = lock
        .acquire_timeout(Duration::from_secs(5))
        .await
        .expect("three of five");
    assert!(second.token() > 101, "token {}", second.token());
    second.release().await.expect("release");
}

//! Redlock fencing tokens when the nodes' counters disagree: the token is
//! the highest counter of the majority that granted the lock, written back
//! to a majority before the guard is handed out, so later majorities see it.

mod redlock_common;

use std::time::Duration;

use redlock_common::{admin, masters, redlock};

const COUNTER: &str = "redlatch_lock_token";

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
    // Masters 0 and 1 have handed out token 100 (to an attempt that got no
    // majority); 2, 3 and 4 lag behind, each differently, so no majority
    // returns the same value and the highest must be written back.
    for (server, counter) in masters.iter().zip([100, 100, 1, 10, 20]) {
        let _: () = redis::cmd("SET")
            .arg(COUNTER)
            .arg(counter)
            .query_async(&mut admin(server).await)
            .await
            .unwrap();
    }
    let redlock = redlock(&masters, Duration::from_secs(30)).await;
    let lock = redlock.lock("rl:fence");
    let first = lock.acquire().await.expect("acquire");
    let token = first.token();
    // The highest counter of the first majority that granted it: 21 when
    // that was masters 2, 3 and 4, else 101.
    assert!(token == 21 || token == 101, "token {token}");
    // Written back to a majority before the guard came out.
    let mut carrying = Vec::new();
    for (i, server) in masters.iter().enumerate() {
        if counter(server).await >= token {
            carrying.push(i);
        }
    }
    assert!(carrying.len() >= 3, "only {carrying:?} carry {token}");
    first.release().await.expect("release");

    // Two nodes carrying the token die; a majority of the others still
    // includes one that carries it, so the next token is higher.
    for &i in &carrying[..2] {
        masters[i].kill().unwrap();
    }
    let second = lock
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .expect("three of five");
    assert!(
        second.token() > token,
        "token {} after {token}",
        second.token()
    );
    second.release().await.expect("release");
}

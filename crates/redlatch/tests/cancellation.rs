//! Dropping futures and guards leaves nothing behind.

mod common;

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::test]
async fn cancelled_waiting_acquire_leaves_no_key_and_no_subscription() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.lock("cancel-me").acquire().await.unwrap();
    let owner = guard.owner().to_owned();

    let waiting = tokio::spawn({
        let lock = waiter.lock("cancel-me");
        async move { lock.acquire().await }
    });
    let channel = "redisson_lock__channel:{cancel-me}";
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            async move { common::subscribers(&mut admin, channel).await == 1 }
        })
        .await,
        "the waiter subscribes while it waits"
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());

    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            async move { common::subscribers(&mut admin, channel).await == 0 }
        })
        .await,
        "the cancelled waiter's subscription must go"
    );
    guard.release().await.unwrap();
    let exists: bool = admin.exists("cancel-me").await.unwrap();
    assert!(!exists, "nothing of the waiter may remain: {owner}");
}

#[tokio::test]
async fn acquire_dropped_mid_flight_gives_the_hold_back() {
    let server = common::server();
    let client = common::client(&server).await;
    let admin = common::admin(&server).await;
    // Drop acquires at many points of their round trip; none may leave a hold.
    for round in 0..200u64 {
        let lock = client.lock("dropped-in-flight");
        let attempt = lock.acquire();
        let _ = tokio::time::timeout(Duration::from_micros(round * 5), attempt).await;
        // Whatever happened, dropping returned guards or cancelled attempts frees the lock.
    }
    assert!(
        common::eventually(Duration::from_secs(3), || {
            let mut admin = admin.clone();
            async move { !admin.exists::<_, bool>("dropped-in-flight").await.unwrap() }
        })
        .await,
        "an abandoned acquire left the lock held"
    );
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test]
async fn dropped_guard_releases_in_background_and_wakes_a_waiter() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("dropped-guard");
    let guard = lock.acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await.map(|guard| guard.token()) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let first = guard.token();
    drop(guard);
    let token = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("a dropped guard wakes the waiter")
        .unwrap()
        .unwrap();
    assert!(token > first);
}

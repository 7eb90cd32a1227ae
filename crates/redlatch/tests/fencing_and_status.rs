//! Fencing tokens, status snapshots and force-unlock.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::test]
async fn tokens_strictly_increase_across_clients() {
    let server = common::server();
    let a = common::client(&server).await;
    let b = common::client(&server).await;
    let mut last = 0;
    for round in 0..20 {
        let client = if round % 2 == 0 { &a } else { &b };
        let guard = client.lock("fenced").acquire().await.unwrap();
        assert!(
            guard.token() > last,
            "token {} after {}",
            guard.token(),
            last
        );
        last = guard.token();
        guard.release().await.unwrap();
    }
    let mut admin = common::admin(&server).await;
    let counter: u64 = admin.get("redisson_lock_token:{fenced}").await.unwrap();
    assert_eq!(counter, last);
}

#[tokio::test]
async fn status_reports_holders_counts_ttl_and_token() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_secs(10)).await;
    let lock = client.lock("inspected");

    let free = lock.status().await.unwrap();
    assert!(!free.held);
    assert!(free.holders.is_empty());
    assert_eq!(free.ttl, None);
    assert_eq!(free.last_token, None);

    let guard = lock.acquire().await.unwrap();
    let again = guard.reenter().await.unwrap();
    let held = lock.status().await.unwrap();
    assert!(held.held);
    assert_eq!(held.holders.len(), 1);
    assert_eq!(held.holders[0].owner, guard.owner());
    assert_eq!(held.holders[0].count, 2);
    let ttl = held.ttl.expect("a lease");
    assert!(
        ttl > Duration::from_secs(8) && ttl <= Duration::from_secs(10),
        "{ttl:?}"
    );
    assert_eq!(held.last_token, Some(guard.token()));
    drop(again);
    drop(guard);
}

#[tokio::test]
async fn force_unlock_frees_the_lock_wakes_waiters_and_marks_guard_lost() {
    let server = common::server();
    let holder = common::client(&server).await;
    let other = common::client(&server).await;
    let guard = holder.lock("stuck").acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = other.lock("stuck");
        async move { lock.acquire().await.map(|guard| guard.token()) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());

    assert!(holder.lock("stuck").force_unlock().await.unwrap());
    let token = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("waiter woken by force-unlock")
        .unwrap()
        .unwrap();
    assert!(token > guard.token());
    assert!(!guard.is_held(), "the forced-out guard must know");
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::ForceUnlocked)
    );
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("lost() resolves after force-unlock");
    assert!(matches!(
        guard.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
    assert!(!other.lock("nothing-here").force_unlock().await.unwrap());
}

#[tokio::test]
async fn key_prefix_applies_to_key_channel_and_counter() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .key_prefix("shop:")
        .connect()
        .await
        .unwrap();
    let mut admin = common::admin(&server).await;
    let guard = client.lock("order").acquire().await.unwrap();
    assert_eq!(guard.key(), "shop:order");
    let exists: bool = admin.exists("shop:order").await.unwrap();
    assert!(exists);
    let counter: u64 = admin.get("redisson_lock_token:{shop:order}").await.unwrap();
    assert_eq!(counter, guard.token());
}

//! Semaphore counts Redisson allows: its `addPermits(-3)` may take a count
//! below zero (its script adds the delta to the count, absent = 0, without
//! a floor). redlatch reads such a count, adds to it, and never takes it
//! below zero itself.

use redis::AsyncCommands;

use crate::common;

#[tokio::test]
async fn a_count_redisson_took_below_zero_is_read_and_added_to() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    // Redisson's addPermits(-3) on a fresh semaphore.
    let () = java.incr("pool", -3).await.unwrap();
    let semaphore = client.semaphore("pool");
    assert_eq!(semaphore.available_permits().await.unwrap(), -3);
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert_eq!(
        semaphore.add_permits(1).await.unwrap(),
        -2,
        "a positive delta applies"
    );
    assert!(
        semaphore.add_permits(-1).await.is_err(),
        "redlatch itself takes no permit below zero"
    );
    assert_eq!(semaphore.add_permits(4).await.unwrap(), 2);
    let permit = semaphore
        .try_acquire_many(2)
        .await
        .unwrap()
        .expect("two permits");
    permit.release().await.unwrap();
    let count: i64 = java.get("pool").await.unwrap();
    assert_eq!(count, 2, "permits conserved");

    let expirable = client.permit_semaphore("slots");
    let () = java.incr("slots", -1).await.unwrap();
    assert_eq!(expirable.available_permits().await.unwrap(), -1);
    assert_eq!(expirable.add_permits(2).await.unwrap(), 1);
}

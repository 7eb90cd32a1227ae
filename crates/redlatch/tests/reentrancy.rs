//! Re-entry by guard and by named owner; hold counts in Redis.

mod common;

use redis::AsyncCommands;

async fn hold_count(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    owner: &str,
) -> Option<i64> {
    conn.hget(key, owner).await.unwrap()
}

#[tokio::test]
async fn guard_reenter_counts_up_and_releases_count_down() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.lock("reentrant");

    let outer = lock.acquire().await.unwrap();
    let owner = outer.owner().to_owned();
    assert_eq!(hold_count(&mut admin, "reentrant", &owner).await, Some(1));
    let inner = outer.reenter().await.unwrap();
    let innermost = inner.reenter().await.unwrap();
    assert_eq!(hold_count(&mut admin, "reentrant", &owner).await, Some(3));
    assert_eq!(outer.token(), inner.token());
    assert_eq!(outer.token(), innermost.token());
    assert_eq!(inner.owner(), owner);

    innermost.release().await.unwrap();
    assert_eq!(hold_count(&mut admin, "reentrant", &owner).await, Some(2));
    drop(inner); // background release
    assert!(
        common::eventually(std::time::Duration::from_secs(2), || {
            let mut admin = admin.clone();
            let owner = owner.clone();
            async move { hold_count(&mut admin, "reentrant", &owner).await == Some(1) }
        })
        .await
    );
    // Still held by the outer guard: nobody else gets it.
    assert!(lock.try_acquire().await.unwrap().is_none());
    outer.release().await.unwrap();
    let exists: bool = admin.exists("reentrant").await.unwrap();
    assert!(!exists, "last release must delete the lock");
}

#[tokio::test]
async fn named_owner_reenters_across_calls_with_same_token() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.lock("by-request").with_owner("request-17");

    let first = lock.acquire().await.unwrap();
    let second = lock.acquire().await.unwrap(); // would deadlock without re-entry
    assert_eq!(first.owner(), format!("{}:request-17", client.id()));
    assert_eq!(first.token(), second.token());
    assert_eq!(
        hold_count(&mut admin, "by-request", first.owner()).await,
        Some(2)
    );

    // Another owner is excluded while request-17 holds it.
    let other = client.lock("by-request").with_owner("request-18");
    assert!(other.try_acquire().await.unwrap().is_none());

    let token = first.token();
    first.release().await.unwrap();
    assert!(
        other.try_acquire().await.unwrap().is_none(),
        "one hold remains"
    );
    second.release().await.unwrap();
    let taken = other
        .try_acquire()
        .await
        .unwrap()
        .expect("free after both releases");
    assert!(taken.token() > token);
}

#[tokio::test]
async fn anonymous_acquires_exclude_each_other_even_from_one_task() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("not-reentrant-by-default");
    let _held = lock.acquire().await.unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
}

#[tokio::test]
async fn reenter_after_lock_was_deleted_is_not_held() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = client.lock("vanishing").acquire().await.unwrap();
    let () = admin.del("vanishing").await.unwrap();
    assert!(matches!(
        guard.reenter().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
    assert!(!guard.is_held());
}

/// A re-entry records the lease it sent, not whatever lease the hold has by
/// the time the reply comes. Here the default lease goes from 1 s to 30 s
/// while Redis is paused: the watchdog's renewal (30 s) and then a re-entry
/// still sending the hold's old 1 s lease reach Redis in that order, so Redis
/// ends with the 1 s lease. Whenever Redis no longer has the hold, the
/// guards must not claim it is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_records_the_lease_it_sent_not_a_newer_one() {
    let server = common::server();
    let client = common::client_with_lease(&server, std::time::Duration::from_secs(1)).await;
    let mut admin = common::admin(&server).await;
    let guard = client.lock("lease-sent").acquire().await.unwrap();
    let owner = guard.owner().to_owned();

    server.pause().unwrap();
    let mut settings = client.settings();
    settings.default_lease = std::time::Duration::from_secs(30);
    client.update_settings(settings).unwrap();
    // The renewal to 30 s goes out first, then the re-entry.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let reentry = tokio::spawn(async move {
        let inner = guard.reenter().await;
        (guard, inner)
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    server.resume().unwrap();
    let (outer, inner) = reentry.await.unwrap();
    let inner = inner.expect("re-entry");
    let pttl: i64 = admin.pttl("lease-sent").await.unwrap();

    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(2500) {
        // Redis first: a hold gone from Redis stays gone, so a guard that
        // says "held" after this read is wrong.
        let in_redis: bool = admin.hexists("lease-sent", &owner).await.unwrap();
        if !in_redis {
            assert!(
                !inner.is_held() && !outer.is_held(),
                "Redis dropped the hold {:?} after the re-entry (its PTTL was {pttl} ms), \
                 yet is_held() says true: the guards count a {:?} lease",
                started.elapsed(),
                inner.lease()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

//! A guard dropped unreleased (`base/release_on_drop.rs`, for `Guard` and
//! `TokenGuard` alike): inside a runtime that shut down, outside any
//! runtime, and after its hold was taken away (force-unlocked, lost) and
//! given to someone else, whose hold it must leave alone.

use std::time::{Duration, Instant};

use redlatch::{AcquireLock, Client, HeldLock};

use crate::common;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Tries `lock` until taken, for at most `limit`; how long it took.
async fn taken_within<L: AcquireLock>(lock: &L, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(guard)) = lock.try_acquire().await {
            let took = start.elapsed();
            guard.release().await.unwrap();
            return Some(took);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[test]
fn guards_outliving_their_runtime_drop_without_panic_and_expire_within_the_lease() {
    let server = common::server();
    let lease = Duration::from_millis(1500);
    let holder_runtime = runtime();
    let (guard, token_guard) = holder_runtime.block_on(async {
        let client = common::client_with_lease(&server, lease).await;
        let guard = client.lock("orphan").acquire().await.unwrap();
        let token_guard = client.token_lock("token-orphan").acquire().await.unwrap();
        (guard, token_guard)
    });
    // The runtime goes first: the client's tasks (the watchdog) with it.
    drop(holder_runtime);
    // Dropped outside any runtime, on a runtime that is gone: no panic.
    drop(guard);
    drop(token_guard);
    let checker = runtime();
    checker.block_on(async {
        let other = common::client(&server).await;
        let limit = lease * 3;
        assert!(taken_within(&other.lock("orphan"), limit).await.is_some());
        assert!(
            taken_within(&other.token_lock("token-orphan"), limit)
                .await
                .is_some()
        );
    });
}

#[test]
fn guards_dropped_on_a_plain_thread_release_at_once() {
    let server = common::server();
    // A lease far longer than the check: only the release frees the lock.
    let lease = Duration::from_secs(60);
    let rt = runtime();
    let (client, guard, token_guard) = rt.block_on(async {
        let client = common::client_with_lease(&server, lease).await;
        let guard = client.lock("thread-drop").acquire().await.unwrap();
        let token_guard = client
            .token_lock("token-thread-drop")
            .acquire()
            .await
            .unwrap();
        (client, guard, token_guard)
    });
    std::thread::spawn(move || {
        drop(guard);
        drop(token_guard);
    })
    .join()
    .unwrap();
    rt.block_on(async {
        let other = common::client(&server).await;
        let limit = Duration::from_secs(10);
        assert!(
            taken_within(&other.lock("thread-drop"), limit)
                .await
                .is_some()
        );
        assert!(
            taken_within(&other.token_lock("token-thread-drop"), limit)
                .await
                .is_some()
        );
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                client.held_locks() == 0
            })
            .await
        );
    });
}

/// `first` holds `name`, someone force-unlocks it, `second` takes it, and
/// `first`'s guard is dropped: `second` must still hold it.
async fn a_stale_drop_leaves_the_new_holder<L: AcquireLock>(
    first: &Client,
    lock_of: impl Fn(&Client) -> L,
    second: &Client,
    force_unlock: impl std::future::Future<Output = bool>,
    what: &str,
) {
    let stale = lock_of(first).acquire().await.unwrap();
    assert!(force_unlock.await, "{what}: nothing force-unlocked");
    let fresh = lock_of(second)
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .unwrap();
    drop(stale);
    // The drop's release has run once the first client holds nothing.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            first.held_locks() == 0
        })
        .await,
        "{what}: the dropped guard's release never ran"
    );
    assert!(fresh.is_held(), "{what}: the new holder lost its hold");
    assert!(
        lock_of(first).try_acquire().await.unwrap().is_none(),
        "{what}: a stale drop released the new holder's lock"
    );
    fresh.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_after_its_hold_was_taken_away_leaves_the_new_holder_alone() {
    let server = common::server();
    let first = common::client(&server).await;
    let second = common::client(&server).await;
    let admin_client = common::client(&server).await;
    a_stale_drop_leaves_the_new_holder(
        &first,
        |client| client.lock("forced"),
        &second,
        async { admin_client.lock("forced").force_unlock().await.unwrap() },
        "lock, force-unlocked",
    )
    .await;
    a_stale_drop_leaves_the_new_holder(
        &first,
        |client| client.token_lock("token-forced"),
        &second,
        async {
            admin_client
                .token_lock("token-forced")
                .force_unlock()
                .await
                .unwrap()
        },
        "token lock, force-unlocked",
    )
    .await;
    // Lost: the key deleted behind the holder's back.
    let admin = common::admin(&server).await;
    let deleted = |key: &'static str| {
        let mut admin = admin.clone();
        async move {
            let removed: i64 = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut admin)
                .await
                .unwrap();
            removed == 1
        }
    };
    a_stale_drop_leaves_the_new_holder(
        &first,
        |client| client.lock("lost"),
        &second,
        deleted("lost"),
        "lock, deleted",
    )
    .await;
    a_stale_drop_leaves_the_new_holder(
        &first,
        |client| client.token_lock("token-lost"),
        &second,
        deleted("token-lost"),
        "token lock, deleted",
    )
    .await;
}

//! Mutual exclusion under contention from several clients.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::AsyncCommands;

const CLIENTS: usize = 3;
const TASKS_PER_CLIENT: usize = 16;
const SECTIONS_PER_TASK: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_read_sleep_write_keeps_exact_count_and_one_holder() {
    let server = common::server();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = common::client(&server).await;
        for _ in 0..TASKS_PER_CLIENT {
            let client = client.clone();
            let mut data = common::admin(&server).await;
            let inside = inside.clone();
            let overlaps = overlaps.clone();
            tasks.push(tokio::spawn(async move {
                let lock = client.lock("counter-lock");
                for _ in 0..SECTIONS_PER_TASK {
                    let guard = lock.acquire().await.expect("acquire");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Non-atomic read-modify-write: only the lock keeps it exact.
                    let value: i64 = data.get("counter").await.unwrap_or(0);
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let () = data.set("counter", value + 1).await.expect("write counter");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release while held");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("worker task");
    }
    let mut data = common::admin(&server).await;
    let counter: i64 = data.get("counter").await.unwrap();
    assert_eq!(
        counter as usize,
        CLIENTS * TASKS_PER_CLIENT * SECTIONS_PER_TASK
    );
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
}

#[tokio::test]
async fn second_acquire_waits_until_first_guard_releases() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("handoff");
    let first = lock.acquire().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "held lock taken twice"
    );

    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.map(|guard| guard.token()) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "waiter got the lock while it was held"
    );
    let first_token = first.token();
    first.release().await.unwrap();
    let second_token = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("waiter woken by the release")
        .unwrap()
        .unwrap();
    assert!(second_token > first_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unlock_wakes_one_waiter_not_all() {
    const WAITERS: usize = 10;
    let server = common::server();
    let holder = common::client(&server).await;
    let waiting = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.lock("herd").acquire().await.unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let lock = waiting.lock("herd");
        let acquired = acquired.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            acquired.fetch_add(1, Ordering::SeqCst);
            // Keep it: the other waiters must stay parked, not retry.
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(guard);
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // all parked
    let before = common::script_calls(&mut admin).await;
    guard.release().await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let acquired = acquired.clone();
            async move { acquired.load(Ordering::SeqCst) == 1 }
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = common::script_calls(&mut admin).await - before;
    // The release, the woken waiter's attempt, and a little slack; a stampede
    // would be one attempt per waiter (10+).
    assert!(
        calls <= 4,
        "{calls} script calls after one unlock with {WAITERS} waiters"
    );
    assert_eq!(acquired.load(Ordering::SeqCst), 1);
    for task in tasks {
        task.abort();
    }
}

/// Concurrent acquires and releases of one client leave together in a few
/// script calls (coalesced), each lock with its own outcome: 256 distinct
/// locks taken at once are all granted, each with its own counter's first
/// token, a lock held
/// elsewhere and a key of the wrong type in the same batches get their own
/// answers, and every release frees its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_share_script_calls_and_keep_their_own_outcomes() {
    const LOCKS: usize = 256;
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let () = admin.set("batch:odd", "a string").await.unwrap();
    let held = other.lock("batch:held").acquire().await.unwrap();

    let before = common::script_calls(&mut admin).await;
    let names: Vec<String> = (0..LOCKS).map(|i| format!("batch:{i}")).collect();
    let acquires = names.iter().map(|name| {
        let lock = client.lock(name.as_str());
        async move { lock.try_acquire().await }
    });
    let busy = client.lock("batch:held");
    let odd = client.lock("batch:odd");
    let (guards, busy, odd) = tokio::join!(
        futures_util::future::join_all(acquires),
        busy.try_acquire(),
        odd.try_acquire(),
    );
    let calls = common::script_calls(&mut admin).await - before;
    let guards: Vec<_> = guards
        .into_iter()
        .map(|outcome| outcome.expect("no error").expect("a free lock is granted"))
        .collect();
    assert!(
        busy.unwrap().is_none(),
        "the lock held elsewhere is refused"
    );
    assert!(
        matches!(odd, Err(redlatch::Error::WrongType { .. })),
        "the string key is refused on its own: {odd:?}"
    );
    let tokens: std::collections::BTreeSet<u64> = guards.iter().map(|g| g.token()).collect();
    assert_eq!(tokens, [1].into(), "each name's own counter starts at 1");
    assert!(
        calls < (LOCKS as u64) / 2,
        "{calls} script calls for {} acquires: not coalesced",
        LOCKS + 2
    );

    let before = common::script_calls(&mut admin).await;
    let releases = guards.into_iter().map(|guard| guard.release());
    for outcome in futures_util::future::join_all(releases).await {
        outcome.expect("released");
    }
    let calls = common::script_calls(&mut admin).await - before;
    assert!(
        calls < (LOCKS as u64) / 2,
        "{calls} script calls for {LOCKS} releases"
    );
    for name in &names {
        let exists: bool = admin.exists(name).await.unwrap();
        assert!(!exists, "{name} still held");
    }
    held.release().await.unwrap();
}

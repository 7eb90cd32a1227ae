//! The counting semaphore: bounds under contention, wake-ups, layout, bad
//! input; and the count-down latch (`semaphore/latch.rs`), a count of the same
//! shape.

#[path = "semaphore/bad_counts_and_pauses.rs"]
mod bad_counts_and_pauses;
mod common;
#[path = "semaphore/latch.rs"]
mod latch;
#[path = "semaphore/old_library.rs"]
mod old_library;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

const PERMITS: u32 = 3;
const CLIENTS: usize = 3;
const TASKS_PER_CLIENT: usize = 16;
const ROUNDS_PER_TASK: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_in_use_never_exceed_the_count_under_three_clients_of_sixteen_tasks() {
    let server = common::server();
    let setup = common::client(&server).await;
    assert!(
        setup
            .semaphore("pool")
            .try_set_permits(PERMITS)
            .await
            .unwrap()
    );
    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = common::client(&server).await;
        for task in 0..TASKS_PER_CLIENT {
            let pool = client.semaphore("pool");
            let in_use = in_use.clone();
            let most = most.clone();
            tasks.push(tokio::spawn(async move {
                // Some tasks take two permits at once, so counts add up unevenly.
                let wanted = 1 + (task % 2) as u32;
                for _ in 0..ROUNDS_PER_TASK {
                    let permit = pool.acquire_many(wanted).await.expect("acquire");
                    let now = in_use.fetch_add(wanted as usize, Ordering::SeqCst) + wanted as usize;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    in_use.fetch_sub(wanted as usize, Ordering::SeqCst);
                    permit.release().await.expect("release");
                }
            }));
        }
    }
    let all = futures_util::future::join_all(tasks);
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every task finished (no waiter was left asleep)")
        .into_iter()
        .for_each(|joined| joined.expect("task"));
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS as usize, "{most} permits in use at once");
    assert!(most >= 2, "the semaphore never let two tasks in together");
    assert_eq!(
        setup.semaphore("pool").available_permits().await.unwrap(),
        3
    );
}

#[tokio::test]
async fn waiter_wakes_on_release_from_another_client() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    holder.semaphore("one").try_set_permits(1).await.unwrap();
    let permit = holder.semaphore("one").acquire().await.unwrap();
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let permit = waiter.semaphore("one").acquire().await.unwrap();
        (started.elapsed(), permit)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "took a permit that was not free");
    let released_at = Instant::now();
    permit.release().await.unwrap();
    let (_, permit) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken")
        .unwrap();
    // Woken by the message, well before the 1 s safety-net recheck would fire
    // (a generous bound for a loaded machine; the recheck alone would take ≥ 850 ms here).
    assert!(
        released_at.elapsed() < Duration::from_millis(650),
        "woken after {:?}",
        released_at.elapsed()
    );
    assert_eq!(permit.permits(), 1);
}

#[tokio::test]
async fn release_of_several_permits_wakes_as_many_waiters_of_one_client() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiters = common::client(&server).await;
    let pool = holder.semaphore("trio");
    pool.try_set_permits(3).await.unwrap();
    let all = pool.acquire_many(3).await.unwrap();
    let mut parked = Vec::new();
    for _ in 0..3 {
        let sem = waiters.semaphore("trio");
        parked.push(tokio::spawn(async move { sem.acquire().await.unwrap() }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released_at = Instant::now();
    all.release().await.unwrap();
    let permits = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::join_all(parked),
    )
    .await
    .expect("all three woken");
    assert_eq!(permits.len(), 3);
    // One message, three waiters: each passes the wake-up on; no one waits for the recheck.
    assert!(
        released_at.elapsed() < Duration::from_millis(650),
        "all woken after {:?}",
        released_at.elapsed()
    );
    assert_eq!(pool.available_permits().await.unwrap(), 0);
}

#[tokio::test]
async fn acquire_timeout_gives_up_and_dropped_waiter_leaves_the_count_alone() {
    let server = common::server();
    let client = common::client(&server).await;
    let pool = client.semaphore("busy");
    pool.try_set_permits(1).await.unwrap();
    let permit = pool.acquire().await.unwrap();
    let err = pool
        .acquire_within(Some(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, redlatch::Error::NoPermits { permits: 1, .. }),
        "{err}"
    );
    assert!(pool.try_acquire().await.unwrap().is_none());
    // A waiter dropped mid-wait takes nothing.
    let waiting = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiting.abort();
    drop(permit); // released in the background
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            pool.available_permits().await.unwrap() == 1
        })
        .await,
        "the dropped permit came back, and the aborted waiter took none"
    );
}

#[tokio::test]
async fn layout_is_redissons_string_count_and_sc_channel() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let pool = client.semaphore("layout");
    assert!(pool.try_set_permits(5).await.unwrap());
    assert!(!pool.try_set_permits(9).await.unwrap(), "set twice");
    let count: String = admin.get("layout").await.unwrap();
    assert_eq!(count, "5");
    let permit = pool.acquire_many(2).await.unwrap();
    let count: i64 = admin.get("layout").await.unwrap();
    assert_eq!(count, 3);
    // A Redisson-style waiter listens on redisson_sc:{NAME} for the new count.
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe("redisson_sc:{layout}").await.unwrap();
    permit.release().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), async {
        use futures_util::StreamExt;
        pubsub.on_message().next().await
    })
    .await
    .expect("release published")
    .unwrap();
    assert_eq!(message.get_payload::<i64>().unwrap(), 5);
    assert_eq!(pool.add_permits(-5).await.unwrap(), 0);
    assert!(matches!(
        pool.add_permits(-1).await,
        Err(redlatch::Error::InvalidPermits { .. })
    ));
}

#[tokio::test]
async fn bad_input_gives_typed_errors() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let pool = client.semaphore("x");
    assert!(matches!(
        pool.acquire_many(0).await,
        Err(redlatch::Error::InvalidPermits { permits: 0, .. })
    ));
    assert!(matches!(
        client.semaphore("").available_permits().await,
        Err(redlatch::Error::InvalidName { .. })
    ));
    let () = admin.hset("a-hash", "f", 1).await.unwrap();
    let hash = client.semaphore("a-hash");
    for err in [
        hash.try_acquire().await.map(|_| ()).unwrap_err(),
        hash.release(1).await.map(|_| ()).unwrap_err(),
        hash.try_set_permits(1).await.map(|_| ()).unwrap_err(),
        hash.available_permits().await.map(|_| ()).unwrap_err(),
    ] {
        assert!(matches!(err, redlatch::Error::WrongValue { .. }), "{err}");
    }
    let () = admin.set("text", "many").await.unwrap();
    assert!(matches!(
        client.semaphore("text").try_acquire().await,
        Err(redlatch::Error::WrongValue { .. })
    ));
    let kind: String = redis::cmd("TYPE")
        .arg("a-hash")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(kind, "hash", "a foreign key is left alone");
}

/// A wake-up its taker cannot use goes on to the next waiter. W1 wants 3
/// permits and W2, queued behind it on the same client, wants 1; when one
/// permit comes back, W1 cannot proceed, so W2 must get it at once rather
/// than at its periodic re-check a second later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_the_first_waiter_cannot_use_goes_to_the_next() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiters = common::client(&server).await;
    let mut waits = Vec::new();
    for round in 0..3 {
        let name = format!("pass-on-{round}");
        let semaphore = holder.semaphore(&name);
        assert!(semaphore.try_set_permits(3).await.unwrap());
        let two = semaphore.acquire_many(2).await.unwrap();
        let one = semaphore.acquire().await.unwrap();
        let big = tokio::spawn({
            let semaphore = waiters.semaphore(&name);
            async move { semaphore.acquire_many(3).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let small = tokio::spawn({
            let semaphore = waiters.semaphore(&name);
            async move {
                let permit = semaphore.acquire().await;
                (permit, Instant::now())
            }
        });
        // Both are parked; W2 re-checks a second after it parked.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let released = Instant::now();
        one.release().await.unwrap();
        let (permit, served) = tokio::time::timeout(Duration::from_secs(3), small)
            .await
            .expect("W2 is served at the latest by its re-check")
            .unwrap();
        drop(permit.expect("W2's permit"));
        waits.push(served - released);
        drop(two);
        let all = tokio::time::timeout(Duration::from_secs(3), big)
            .await
            .expect("W1 gets its 3 permits once all are back")
            .unwrap()
            .expect("W1's permits");
        drop(all);
    }
    assert!(
        waits
            .iter()
            .all(|waited| *waited < Duration::from_millis(400)),
        "W2 waited {waits:?} after the release that freed its permit"
    );
}

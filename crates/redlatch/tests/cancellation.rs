//! Dropping futures and guards leaves nothing behind.
//!
//! The `cancelled_*` tests run storms of acquires (or re-entries) cancelled
//! at random points: by `JoinHandle::abort`, by losing a `select!` to a short
//! random sleep, and by `tokio::time::timeout` with a short random limit, on
//! a multi-thread and on a current-thread runtime. Once every background
//! release has landed they count what Redis still holds: hold counts in lock
//! hashes, permits missing from semaphores, Redlock holds still renewed.
//!
//! Each storm is `REDLATCH_CANCEL_ROUNDS` batches (default 5) of 48 attempts
//! per way of cancelling and per runtime: about 1,400 cancellations per
//! primitive, a few seconds each. Long mode, for hunting rare leaks:
//!
//! ```text
//! REDLATCH_CANCEL_ROUNDS=100 cargo test -p redlatch --test cancellation -- --include-ignored --test-threads=1 --nocapture
//! ```
//!
//! `REDLATCH_TEST_SEED` replays the random cancellation points of a run.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Rng;
use redis::AsyncCommands;
use redlatch::{Client, Redlock};

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

/// How a storm cancels its attempts.
#[derive(Clone, Copy, Debug)]
enum Cancel {
    Abort,
    Select,
    Timeout,
}

#[derive(Clone, Copy, Debug)]
enum Flavor {
    MultiThread,
    CurrentThread,
}

/// Attempts started at once in one batch of a storm.
const BATCH: u64 = 48;
/// Names per batch of the lock storms: several attempts contend for each.
const NAMES: u64 = 8;
/// Permits of each semaphore of a storm.
const PERMITS: u32 = 8;
/// The lease of the storms' holds. Every batch uses fresh names, so a leaked
/// hold stalls no later batch; the lease only has to outlast the count.
const LEASE: Duration = Duration::from_secs(10);
/// The Redlock storm's lease: short, so that after three of them only holds
/// somebody still renews are left.
const REDLOCK_LEASE: Duration = Duration::from_millis(400);
/// Bound on waiting for background releases to land.
const SETTLE: Duration = Duration::from_secs(3);

fn rounds() -> u64 {
    std::env::var("REDLATCH_CANCEL_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(5)
}

fn runtime(flavor: Flavor) -> tokio::runtime::Runtime {
    match flavor {
        Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .expect("runtime")
}

async fn connect(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .connect()
        .await
        .expect("connect to the test server")
}

async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection")
}

/// Starts `attempt(i)` for every `i` of a batch at once, each cancelled by
/// `how` at a random point within 3 ms, and waits until all of them ended.
async fn storm<F, Fut>(how: Cancel, rng: &mut Rng, attempt: F)
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut tasks = Vec::new();
    for i in 0..BATCH {
        let work = attempt(i);
        let limit = Duration::from_micros(rng.below(3000));
        let yields = rng.below(64);
        let task = match how {
            Cancel::Abort => {
                let handle = tokio::spawn(work);
                tokio::spawn(async move {
                    // Yields land within the round trip, sleeps around it.
                    if yields.is_multiple_of(2) {
                        for _ in 0..yields {
                            tokio::task::yield_now().await;
                        }
                    } else {
                        tokio::time::sleep(limit).await;
                    }
                    handle.abort();
                    let _ = handle.await;
                })
            }
            Cancel::Select => tokio::spawn(async move {
                tokio::select! {
                    () = work => {}
                    () = tokio::time::sleep(limit) => {}
                }
            }),
            Cancel::Timeout => tokio::spawn(async move {
                let _ = tokio::time::timeout(limit, work).await;
            }),
        };
        tasks.push(task);
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// Runs `leaks` (what a storm left behind) for every way of cancelling on
/// both runtimes, against `servers` fresh redis-servers, and fails when
/// anything was left.
fn assert_nothing_left<F, Fut>(what: &str, servers: usize, leaks: F)
where
    F: Fn(Vec<String>, Cancel, String, u64) -> Fut,
    Fut: Future<Output = i64>,
{
    let masters = common::masters(servers);
    let urls = masters.urls();
    let mut rng = Rng::from_env();
    let started = Instant::now();
    let mut report = Vec::new();
    let mut total = 0;
    for flavor in [Flavor::MultiThread, Flavor::CurrentThread] {
        let runtime = runtime(flavor);
        for how in [Cancel::Abort, Cancel::Select, Cancel::Timeout] {
            let tag = format!("{what}:{flavor:?}:{how:?}");
            let seed = rng.below(u64::MAX);
            let left = runtime.block_on(leaks(urls.clone(), how, tag, seed));
            report.push(format!("{flavor:?}/{how:?} {left}"));
            total += left;
        }
    }
    let report = report.join(", ");
    eprintln!(
        "{what}: {} cancelled attempts in {:.1?}; left behind: {report}",
        6 * rounds() * BATCH,
        started.elapsed()
    );
    assert_eq!(
        total, 0,
        "{what}: cancelled attempts left holds or permits behind ({report})"
    );
}

/// Hold counts left under `prefix` once background releases have landed.
async fn settled_holds(url: &str, prefix: String) -> i64 {
    let conn = admin(url).await;
    common::settled(SETTLE, || {
        let mut conn = conn.clone();
        let prefix = prefix.clone();
        async move { common::holds_left(&mut conn, &prefix).await }
    })
    .await
}

async fn lock_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        storm(how, &mut rng, |i| {
            let lock = client.lock(format!("{tag}:{round}:{}", i % NAMES));
            async move {
                if let Ok(guard) = lock.acquire().await {
                    drop(guard);
                }
            }
        })
        .await;
    }
    settled_holds(&urls[0], format!("{tag}:")).await
}

async fn fair_lock_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        storm(how, &mut rng, |i| {
            let lock = client.fair_lock(format!("{tag}:{round}:{}", i % NAMES));
            async move {
                if let Ok(guard) = lock.acquire().await {
                    drop(guard);
                }
            }
        })
        .await;
    }
    settled_holds(&urls[0], format!("{tag}:")).await
}

async fn read_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        storm(how, &mut rng, |i| {
            let lock = client.read_write_lock(format!("{tag}:{round}:{}", i % NAMES));
            async move {
                if let Ok(guard) = lock.read().await {
                    drop(guard);
                }
            }
        })
        .await;
    }
    settled_holds(&urls[0], format!("{tag}:")).await
}

async fn write_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        storm(how, &mut rng, |i| {
            let lock = client.read_write_lock(format!("{tag}:{round}:{}", i % NAMES));
            async move {
                if let Ok(guard) = lock.write().await {
                    drop(guard);
                }
            }
        })
        .await;
    }
    settled_holds(&urls[0], format!("{tag}:")).await
}

async fn reenter_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        let base = Arc::new(
            client
                .lock(format!("{tag}:{round}"))
                .acquire()
                .await
                .expect("acquire"),
        );
        storm(how, &mut rng, |_| {
            let base = base.clone();
            async move {
                if let Ok(guard) = base.reenter().await {
                    drop(guard);
                }
            }
        })
        .await;
        // The last guard: the lock is deleted unless a re-entry is still counted.
        drop(base);
    }
    settled_holds(&urls[0], format!("{tag}:")).await
}

async fn semaphore_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    let mut semaphores = Vec::new();
    for round in 0..rounds() {
        let semaphore = client.semaphore(format!("{tag}:{round}"));
        assert!(
            semaphore
                .try_set_permits(PERMITS)
                .await
                .expect("set permits")
        );
        storm(how, &mut rng, |_| {
            let semaphore = semaphore.clone();
            async move {
                if let Ok(permit) = semaphore.acquire().await {
                    drop(permit);
                }
            }
        })
        .await;
        semaphores.push(semaphore);
    }
    common::settled(SETTLE, || {
        let semaphores = semaphores.clone();
        async move {
            let mut missing = 0;
            for semaphore in &semaphores {
                let available = semaphore.available_permits().await.expect("available");
                missing += i64::from(PERMITS) - available as i64;
            }
            missing
        }
    })
    .await
}

async fn permit_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    let mut semaphores = Vec::new();
    for round in 0..rounds() {
        let semaphore = client.permit_semaphore(format!("{tag}:{round}"));
        assert!(
            semaphore
                .try_set_permits(PERMITS)
                .await
                .expect("set permits")
        );
        storm(how, &mut rng, |_| {
            let semaphore = semaphore.clone();
            async move {
                if let Ok(permit) = semaphore.acquire().await {
                    drop(permit);
                }
            }
        })
        .await;
        semaphores.push(semaphore);
    }
    common::settled(SETTLE, || {
        let semaphores = semaphores.clone();
        async move {
            let mut missing = 0;
            for semaphore in &semaphores {
                let available = semaphore.available_permits().await.expect("available");
                missing += i64::from(PERMITS) - available as i64;
            }
            missing
        }
    })
    .await
}

async fn redlock_reenter_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let mut clients = Vec::new();
    for url in &urls {
        clients.push((url.clone(), connect(url, REDLOCK_LEASE).await));
    }
    let redlock = Redlock::with_labels(clients).expect("redlock");
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        let base = Arc::new(
            redlock
                .lock(format!("{tag}:{round}"))
                .acquire()
                .await
                .expect("acquire"),
        );
        storm(how, &mut rng, |_| {
            let base = base.clone();
            async move {
                if let Ok(guard) = base.reenter().await {
                    drop(guard);
                }
            }
        })
        .await;
        drop(base);
    }
    // Three leases on: a hold nobody renews has expired; what is left is
    // renewed for a guard that does not exist.
    tokio::time::sleep(3 * REDLOCK_LEASE).await;
    let mut left = 0;
    for url in &urls {
        left += common::holds_left(&mut admin(url).await, &format!("{tag}:")).await;
    }
    left
}

/// Token lock keys left under `prefix` (strings holding a token) once
/// background releases have landed.
async fn settled_token_holds(url: &str, prefix: String) -> i64 {
    let conn = admin(url).await;
    common::settled(SETTLE, || {
        let mut conn = conn.clone();
        let prefix = prefix.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{prefix}*"))
                .query_async(&mut conn)
                .await
                .expect("KEYS");
            keys.len() as i64
        }
    })
    .await
}

async fn token_lock_leaks(urls: Vec<String>, how: Cancel, tag: String, seed: u64) -> i64 {
    let client = connect(&urls[0], LEASE).await;
    let mut rng = Rng::new(seed);
    for round in 0..rounds() {
        storm(how, &mut rng, |i| {
            let mut lock = client.token_lock(format!("{tag}:{round}:{}", i % NAMES));
            if i % 3 == 0 {
                lock = lock.fenced();
            }
            async move {
                if let Ok(guard) = lock.acquire().await {
                    drop(guard);
                }
            }
        })
        .await;
    }
    let left = settled_token_holds(&urls[0], format!("{tag}:")).await;
    assert_eq!(client.held_locks(), 0, "{tag}: guards still tracked");
    left
}

#[test]
fn cancelled_token_lock_acquires_leave_no_key() {
    assert_nothing_left("token", 1, token_lock_leaks);
}

#[test]
fn cancelled_lock_acquires_leave_no_hold() {
    assert_nothing_left("lock", 1, lock_leaks);
}

#[test]
fn cancelled_fair_lock_acquires_leave_no_hold() {
    assert_nothing_left("fair", 1, fair_lock_leaks);
}

#[test]
fn cancelled_reads_leave_no_hold() {
    assert_nothing_left("read", 1, read_leaks);
}

#[test]
fn cancelled_writes_leave_no_hold() {
    assert_nothing_left("write", 1, write_leaks);
}

#[test]
fn cancelled_reentries_leave_no_extra_hold() {
    assert_nothing_left("reenter", 1, reenter_leaks);
}

#[test]
fn cancelled_semaphore_acquires_lose_no_permit() {
    assert_nothing_left("semaphore", 1, semaphore_leaks);
}

#[test]
fn cancelled_permit_acquires_lose_no_permit() {
    assert_nothing_left("permit", 1, permit_leaks);
}

#[test]
fn cancelled_redlock_reentries_leave_nothing_renewed() {
    assert_nothing_left("redlock", 3, redlock_reenter_leaks);
}

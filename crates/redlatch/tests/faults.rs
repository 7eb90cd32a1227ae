//! Redis-side faults: flushed scripts, killed subscriptions, a paused server.
//! The checks of a hold under faults run for the default lock and for the
//! token lock ([`lock_kinds`]), one after the other on one server.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;
#[path = "faults/counts_flushed.rs"]
mod counts_flushed;
#[path = "faults/drops.rs"]
mod drops;

#[path = "faults/lock_kinds.rs"]
mod lock_kinds;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lock_kinds::{DefaultLock, LockKind, TokenKind};
use redlatch::{AcquireLock, Error, HeldLock};

/// The lock `name` of kind `K` on its own key: the kinds share a server.
fn named<K: LockKind>(name: &str) -> String {
    format!("{name}:{}", K::NAME)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_is_reloaded_transparently() {
    let server = common::server();
    // Renewed every 300 ms: several renewals meet a flushed server, each
    // with two periods to spare before the lease ends (a 300 ms lease was
    // lost once at load 15, where a renewal's fallback after a flush took
    // its two round trips late).
    let lease = Duration::from_millis(900);
    // One client runs its scripts as functions, the other by EVALSHA: each
    // flush below takes both the function library and the script cache.
    let client = common::client_with_lease(&server, lease).await;
    let evalsha = common::evalsha_client_at(&server.url(), lease).await;
    let mut admin = common::admin(&server).await;
    let renewed = client.lock("flush-renewed").acquire().await.unwrap();
    let renewed_by_evalsha = evalsha
        .lock("flush-renewed-evalsha")
        .acquire()
        .await
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for worker in 0..4 {
        let lock = if worker % 2 == 0 { &client } else { &evalsha }.lock("flushed");
        let done = done.clone();
        workers.push(tokio::spawn(async move {
            for _ in 0..100 {
                let guard = lock.acquire().await.expect("acquire across SCRIPT FLUSH");
                guard.release().await.expect("release across SCRIPT FLUSH");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for _ in 0..5 {
        flush_scripts(&mut admin).await;
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(done.load(Ordering::Relaxed), 400);
    // One more flush, then more than a lease of renewals after it.
    flush_scripts(&mut admin).await;
    tokio::time::sleep(lease + Duration::from_millis(300)).await;
    // The watchdogs load their scripts again too: the leases survived.
    assert!(renewed.is_held() && renewed_by_evalsha.is_held());
    renewed
        .release()
        .await
        .expect("renewed across SCRIPT FLUSH");
    renewed_by_evalsha
        .release()
        .await
        .expect("renewed across SCRIPT FLUSH");
}

/// Takes the server's script cache and function library away.
async fn flush_scripts(admin: &mut redis::aio::MultiplexedConnection) {
    for flush in ["SCRIPT", "FUNCTION"] {
        let () = redis::cmd(flush)
            .arg("FLUSH")
            .query_async(admin)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_subscription_leaves_no_waiter_stuck_past_the_lease() {
    let server = common::server();
    killed_wakeups_leave_no_waiter_stuck::<DefaultLock>(&server).await;
    killed_wakeups_leave_no_waiter_stuck::<TokenKind>(&server).await;
}

/// The waiters' wake-ups are cut off (the default lock's subscription, the
/// token lock's tracking connections) just before a release.
async fn killed_wakeups_leave_no_waiter_stuck<K: LockKind>(server: &testkit::RedisServer) {
    let lease = Duration::from_secs(2);
    let name = &named::<K>("pubsub-killed");
    let holder = common::client_with_lease(server, lease).await;
    let waiters = common::client(server).await;
    let mut admin = common::admin(server).await;
    let guard = K::lock(&holder, name).acquire().await.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..5 {
        let lock = K::lock(&waiters, name);
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire().await?;
            guard.release().await?;
            Ok::<_, Error>(Instant::now())
        }));
    }
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            async move { K::waiters_listening(&mut admin, name).await }
        })
        .await,
        "{}: the waiters never listened",
        K::NAME
    );
    let killed = K::kill_wakeups(&mut admin).await;
    assert!(killed >= 1, "{}: no wake-up connection to kill", K::NAME);
    // Release while the waiters' wake-ups are down or just coming back.
    guard.release().await.unwrap();
    let released_at = Instant::now();
    for task in tasks {
        let finished = tokio::time::timeout(lease + Duration::from_secs(2), task)
            .await
            .unwrap_or_else(|_| panic!("{}: a waiter stayed stuck past the lease", K::NAME))
            .unwrap()
            .unwrap();
        assert!(finished.duration_since(released_at) <= lease + Duration::from_secs(1));
    }
    // And the wake-ups came back for later waiters: woken by the release,
    // well before the lease, and before a token lock waiter's 1 s re-check.
    let guard = K::lock(&holder, name).acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = K::lock(&waiters, name);
        async move { lock.acquire().await.map(|_| Instant::now()) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.release().await.unwrap();
    let released_at = Instant::now();
    let woke = tokio::time::timeout(Duration::from_millis(1500), waiter)
        .await
        .unwrap_or_else(|_| panic!("{}: not woken after the wake-ups came back", K::NAME))
        .unwrap()
        .unwrap();
    let took = woke.duration_since(released_at);
    assert!(
        took < Duration::from_millis(500),
        "{}: woken {took:?} after the release",
        K::NAME
    );
}

/// A server that accepts connections and never answers: connecting gives
/// up after the connect timeout, retries included (it took four connect
/// timeouts and the retry delays), with an error naming the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_paused_server_gives_up_after_the_connect_timeout() {
    let server = common::server();
    server.pause().unwrap();
    let limit = Duration::from_secs(1);
    let started = Instant::now();
    let connected = tokio::time::timeout(
        Duration::from_secs(10),
        redlatch::Client::builder(&server.url())
            .connect_timeout(limit)
            .connect(),
    )
    .await
    .expect("connecting to a paused server hung past 10 s");
    let gave_up = started.elapsed();
    server.resume().unwrap();
    let error = connected.expect_err("connected to a paused server");
    assert!(
        matches!(error, Error::ConnectTimeout { limit: l, tls: false } if l == limit),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert!(error.to_string().contains("within 1s"), "{error}");
    assert!(
        gave_up < Duration::from_secs(4),
        "gave up after {gave_up:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_redis_gives_typed_errors_then_recovers() {
    let server = common::server();
    paused_gives_typed_errors_then_recovers::<DefaultLock>(&server).await;
    paused_gives_typed_errors_then_recovers::<TokenKind>(&server).await;
}

async fn paused_gives_typed_errors_then_recovers<K: LockKind>(server: &testkit::RedisServer) {
    let client = common::client(server).await; // 500 ms response timeout
    let lock = K::lock(&client, &named::<K>("paused"));
    lock.acquire().await.unwrap().release().await.unwrap();

    server.pause().unwrap();
    let during = tokio::time::timeout(Duration::from_secs(5), lock.try_acquire())
        .await
        .expect("a call to a paused server must not hang past the response timeout");
    server.resume().unwrap();
    match during {
        Err(error) => assert!(
            error.is_transient(),
            "{}: not a connection error: {error:?}",
            K::NAME
        ),
        Ok(_) => panic!("{}: acquired from a paused server", K::NAME),
    }
    let recovered = common::eventually(Duration::from_secs(5), || {
        let lock = lock.clone();
        async move {
            match lock.try_acquire().await {
                Ok(Some(guard)) => guard.release().await.is_ok(),
                _ => false,
            }
        }
    })
    .await;
    assert!(
        recovered,
        "{}: the client did not recover after the server resumed",
        K::NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lent_connection_is_bounded_by_the_response_timeout() {
    let server = common::server();
    let client = common::client(&server).await; // 500 ms response timeout
    let mut conn = client.redis_connection();
    let () = redis::cmd("SET")
        .arg("lent")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();

    server.pause().unwrap();
    let asked = Instant::now();
    let during = tokio::time::timeout(
        Duration::from_secs(10),
        redis::cmd("GET").arg("lent").query_async::<i64>(&mut conn),
    )
    .await;
    let waited = asked.elapsed();
    server.resume().unwrap();
    let answer = during.expect("a command on the lent connection hung on a paused server");
    let error = answer.expect_err("answered by a paused server");
    assert_eq!(error.kind(), redis::ErrorKind::Io, "{error:?}");
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");

    let recovered = common::eventually(Duration::from_secs(5), || {
        let mut conn = conn.clone();
        async move {
            redis::cmd("GET")
                .arg("lent")
                .query_async::<i64>(&mut conn)
                .await
                .is_ok_and(|value| value == 1)
        }
    })
    .await;
    assert!(recovered, "the lent connection did not recover");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_is_lost_when_redis_stays_unreachable_past_the_lease() {
    let server = common::server();
    lost_when_unreachable_past_the_lease::<DefaultLock>(&server).await;
    lost_when_unreachable_past_the_lease::<TokenKind>(&server).await;
}

async fn lost_when_unreachable_past_the_lease<K: LockKind>(server: &testkit::RedisServer) {
    let lease = Duration::from_millis(600);
    let client = common::client_with_lease(server, lease).await;
    let guard = K::lock(&client, &named::<K>("unreachable"))
        .acquire()
        .await
        .unwrap();
    server.pause().unwrap();
    let paused_at = Instant::now();
    let lost = tokio::time::timeout(lease + Duration::from_millis(500), guard.lost()).await;
    server.resume().unwrap();
    lost.unwrap_or_else(|_| {
        panic!(
            "{}: lost() once the lease ran out without a renewal",
            K::NAME
        )
    });
    assert!(paused_at.elapsed() <= lease + Duration::from_millis(500));
    assert!(!guard.is_held(), "{}", K::NAME);
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::NotRenewed),
        "{}",
        K::NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_empty_marks_held_guards_lost_and_recovers() {
    let mut server = common::server();
    restarted_empty_marks_lost_and_recovers::<DefaultLock>(&mut server).await;
    restarted_empty_marks_lost_and_recovers::<TokenKind>(&mut server).await;
}

async fn restarted_empty_marks_lost_and_recovers<K: LockKind>(server: &mut testkit::RedisServer) {
    let lease = Duration::from_millis(900);
    let client = common::client_with_lease(server, lease).await;
    let name = named::<K>("restarted");
    let guard = K::lock(&client, &name).acquire().await.unwrap();
    server.restart().unwrap(); // kill -9, then an empty server on the same port
    // The next renewal (reconnected) finds the key gone, or none gets through
    // before the lease runs out: either way the guard must learn it lost the lock.
    tokio::time::timeout(lease + Duration::from_millis(500), guard.lost())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{}: lost() after the lock vanished with the restart",
                K::NAME
            )
        });
    assert!(!guard.is_held(), "{}", K::NAME);
    let recovered = common::eventually(Duration::from_secs(5), || {
        let lock = K::lock(&client, &name);
        async move { matches!(lock.try_acquire().await, Ok(Some(_))) }
    })
    .await;
    assert!(
        recovered,
        "{}: the client did not reconnect after the restart",
        K::NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_recovers_when_redis_restarts_under_it() {
    let mut server = common::server();
    waiter_recovers_from_a_restart::<DefaultLock>(&mut server).await;
    waiter_recovers_from_a_restart::<TokenKind>(&mut server).await;
}

async fn waiter_recovers_from_a_restart<K: LockKind>(server: &mut testkit::RedisServer) {
    let holder = common::client(server).await; // 30 s lease: only a wake-up helps
    let waiting = common::client(server).await;
    let name = named::<K>("restart-waiter");
    let guard = K::lock(&holder, &name).acquire().await.unwrap();
    let before = K::fence(&guard);
    let waiter = tokio::spawn({
        let lock = K::lock(&waiting, &name);
        async move {
            // Connection errors while Redis is down are expected: keep asking.
            loop {
                match lock.acquire().await {
                    Ok(guard) => return K::fence(&guard),
                    Err(error) if error.is_transient() => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(other) => panic!("unexpected error: {other}"),
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "{}", K::NAME);
    // The restart drops the lock (no unlock message is ever sent) and the
    // waiter's subscription (the default lock) or the tracking of the key
    // it waits for (the token lock); their renewal must wake it.
    server.restart().unwrap();
    let token = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap_or_else(|_| panic!("{}: the waiter stayed parked after the restart", K::NAME))
        .unwrap();
    // The counter went with the empty server and starts again from the
    // server's clock: still above the token of before (issue 36; it was 1,
    // equal to the holder's, before). An unfenced token lock has none.
    if let (Some(token), Some(before)) = (token, before) {
        assert!(
            token > before,
            "token {token} after the empty restart, {before} before"
        );
    }
    drop(guard);
}

/// How long a guard may take to learn its hold is gone: far below the
/// renewal period of the 30 s default lease (10 s), which is what finding
/// it took before the watch; the promise is 50 ms on loopback, the bound
/// is generous for loaded machines.
const NOTICED_WITHIN: Duration = Duration::from_secs(2);

/// Holds a fresh lock of kind `K` named after `name` (watched once
/// settled), does `cause` to it (given its key: the tests' prefix is
/// empty), and returns how long the guard took to learn it lost the lock.
async fn time_to_notice<K, F, Fut>(server: &testkit::RedisServer, name: &str, cause: F) -> Duration
where
    K: LockKind,
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let name = &named::<K>(name);
    let client = common::client(server).await;
    let guard = K::lock(&client, name).acquire().await.unwrap();
    // Past the watch's settling time: the key is tracked.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(guard.is_held());
    let lost = guard.lost();
    let started = Instant::now();
    cause(name.clone()).await;
    tokio::time::timeout(NOTICED_WITHIN, lost)
        .await
        .unwrap_or_else(|_| panic!("{name}: the guard did not learn within {NOTICED_WITHIN:?}"));
    let took = started.elapsed();
    assert!(!guard.is_held(), "{name}");
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::Gone),
        "{name}"
    );
    eprintln!("{name}: lost noticed after {took:?}");
    took
}

/// Sends one command, its words as given, on an admin connection.
async fn admin_cmd(server: &testkit::RedisServer, words: &[&str]) {
    let mut admin = common::admin(server).await;
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    let _: redis::Value = cmd.query_async(&mut admin).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_is_noticed_at_once() {
    let server = common::server();
    let server = &server;
    let del = |key: String| async move { admin_cmd(server, &["DEL", &key]).await };
    time_to_notice::<DefaultLock, _, _>(server, "noticed:del", del).await;
    time_to_notice::<TokenKind, _, _>(server, "noticed:del", del).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_by_another_client_is_noticed_at_once() {
    let server = common::server();
    force_unlock_by_another_client_is_noticed::<DefaultLock>(&server).await;
    force_unlock_by_another_client_is_noticed::<TokenKind>(&server).await;
}

async fn force_unlock_by_another_client_is_noticed<K: LockKind>(server: &testkit::RedisServer) {
    let other = common::client(server).await;
    time_to_notice::<K, _, _>(server, "noticed:force", |name| async move {
        let deleted = K::force_unlock(&K::lock(&other, &name)).await.unwrap();
        assert!(deleted, "{}: nothing to force-unlock", K::NAME);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_is_noticed_at_once() {
    let server = common::server();
    let flush = |_key: String| admin_cmd(&server, &["FLUSHALL"]);
    time_to_notice::<DefaultLock, _, _>(&server, "noticed:flush", flush).await;
    time_to_notice::<TokenKind, _, _>(&server, "noticed:flush", flush).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_key_is_noticed_at_once() {
    let server = common::server();
    // Someone shortens the lease by hand; the key expires 30 ms later.
    let server = &server;
    let expire = |key: String| async move { admin_cmd(server, &["PEXPIRE", &key, "30"]).await };
    time_to_notice::<DefaultLock, _, _>(server, "noticed:expired", expire).await;
    time_to_notice::<TokenKind, _, _>(server, "noticed:expired", expire).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_lost_the_data_is_noticed_at_once() {
    let mut server = common::server();
    restart_that_lost_the_data_is_noticed::<DefaultLock>(&mut server).await;
    restart_that_lost_the_data_is_noticed::<TokenKind>(&mut server).await;
}

async fn restart_that_lost_the_data_is_noticed<K: LockKind>(server: &mut testkit::RedisServer) {
    let port = server.port();
    let client = common::client(server).await;
    let guard = K::lock(&client, &named::<K>("noticed:restart"))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lost = guard.lost();
    tokio::task::block_in_place(|| server.restart()).expect("restart the server");
    tokio::time::timeout(NOTICED_WITHIN, lost)
        .await
        .unwrap_or_else(|_| panic!("{}: the restart on {port} went unnoticed", K::NAME));
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::Gone),
        "{}",
        K::NAME
    );
}

/// The watch never marks a hold that is still there, nor one released by
/// its own guard: many short and settled holds, each released by its
/// guard, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_holds_released_by_their_guards_are_never_lost() {
    let server = common::server();
    // At once: the kinds' keys differ, and each watch sees the other's traffic.
    tokio::join!(
        watched_holds_released_are_never_lost::<DefaultLock>(&server),
        watched_holds_released_are_never_lost::<TokenKind>(&server),
    );
}

async fn watched_holds_released_are_never_lost<K: LockKind>(server: &testkit::RedisServer) {
    let client = common::client(server).await;
    let mut tasks = Vec::new();
    for task in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = common::Rng::new(task);
            for round in 0..40 {
                let guard = K::lock(&client, &named::<K>(&format!("watched:{}", round % 3)))
                    .acquire()
                    .await
                    .unwrap();
                // Around the watch's settling time: some read, some not.
                tokio::time::sleep(Duration::from_millis(rng.below(25))).await;
                assert!(
                    guard.is_held(),
                    "{}: task {task} round {round}: lost while held",
                    K::NAME
                );
                guard.release().await.expect("released by its guard");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_watch_a_deleted_key_waits_for_the_renewal() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .watch_holds(false)
        .connect()
        .await
        .unwrap();
    let guard = client.lock("unwatched").acquire().await.unwrap();
    admin_cmd(&server, &["DEL", "unwatched"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Still believed: the next renewal (10 s away) is what finds it gone.
    assert!(guard.is_held());
}

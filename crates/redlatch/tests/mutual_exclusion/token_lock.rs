//! The token lock (`SET NX PX` with an owner token): exclusion across
//! clients, wake-ups without any message, the loss signal, the watchdog,
//! and bad data in its key. Runs on every server of the matrix: natively
//! where the server has `DELIFEQ`/`DELEX` and `SET … IFEQ` (Valkey 9.0+,
//! Redis 8.4+), by script elsewhere; each test says which it ran.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Client, Error, LostReason};

use crate::common;

/// Says which path a test ran: the script-free one, or the scripts'.
async fn path(client: &Client) -> &'static str {
    let native = client.token_lock("probe").is_script_free();
    let path = if native {
        "native (DELIFEQ or DELEX, SET IFEQ)"
    } else {
        "fallback (scripts: this server lacks DELIFEQ/DELEX or SET IFEQ)"
    };
    eprintln!("token lock path: {path}");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_lock_keeps_exact_count_and_one_holder_across_clients() {
    const CLIENTS: usize = 3;
    const TASKS: usize = 8;
    const SECTIONS: usize = 60;
    let server = common::server();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for index in 0..CLIENTS {
        let client = common::client(&server).await;
        if index == 0 {
            path(&client).await;
        }
        for _ in 0..TASKS {
            let lock = client.token_lock("token:counter");
            let mut data = common::admin(&server).await;
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = lock.acquire().await.expect("acquire");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let value: Option<i64> = data.get("token:count").await.expect("read");
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let () = data
                        .set("token:count", value.unwrap_or(0) + 1)
                        .await
                        .expect("write");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release while held");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("worker");
    }
    let mut data = common::admin(&server).await;
    let count: i64 = data.get("token:count").await.unwrap();
    assert_eq!(count as usize, CLIENTS * TASKS * SECTIONS, "lost updates");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    let left: bool = data.exists("token:counter").await.unwrap();
    assert!(!left, "the lock's key outlived its last release");
}

/// A release publishes nothing; a waiter of another client is woken by the
/// loss watch's tracking of the key (or, lean, by its poll), long before
/// the holder's 30 s lease would end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_another_client_is_woken_by_the_release_not_the_lease() {
    let server = common::server();
    let holder = common::client(&server).await;
    let watched = common::client(&server).await;
    let lean = Client::builder(&server.url())
        .response_timeout(Duration::from_millis(500))
        .lean()
        .connect()
        .await
        .unwrap();
    path(&holder).await;
    for (kind, waiter) in [("watched", &watched), ("lean", &lean)] {
        let guard = holder.token_lock("token:wake").acquire().await.unwrap();
        let lock = waiter.token_lock("token:wake");
        let waiting = tokio::spawn(async move {
            let guard = lock.acquire_within(Some(Duration::from_secs(10))).await;
            (guard, Instant::now())
        });
        // Long enough for the waiter to park (and, watched, track the key).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "{kind}: the waiter did not wait");
        let released = Instant::now();
        guard.release().await.unwrap();
        let (taken, at) = waiting.await.unwrap();
        let taken = taken.unwrap_or_else(|e| panic!("{kind}: {e}"));
        let late = at.duration_since(released);
        eprintln!("{kind} waiter took the lock {late:?} after the release");
        assert!(
            late < Duration::from_secs(2),
            "{kind}: woken {late:?} after the release"
        );
        taken.release().await.unwrap();
    }
}

/// Waiters of the releasing client are woken by the release itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_the_releasing_client_take_turns() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.token_lock("token:local");
    let first = lock.acquire().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..4 {
        let lock = lock.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire_within(Some(Duration::from_secs(10))).await?;
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    first.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap().expect("each waiter got its turn");
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "turns took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_is_signalled_lost_and_its_release_is_not_held() {
    let server = common::server();
    let client = common::client(&server).await;
    path(&client).await;
    let mut admin = common::admin(&server).await;
    let guard = client.token_lock("token:lost").acquire().await.unwrap();
    let owner: String = admin.get("token:lost").await.unwrap();
    assert_eq!(
        owner,
        guard.owner_token(),
        "the key holds the guard's token"
    );
    // Past the loss watch's settling time: the key is tracked.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let deleted_at = Instant::now();
    let () = admin.del("token:lost").await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the loss is signalled within milliseconds (loss watch)");
    eprintln!("loss known {:?} after the delete", deleted_at.elapsed());
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    assert!(!guard.is_held());
    assert!(matches!(guard.release().await, Err(Error::NotHeld { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_a_held_token_lock_past_its_lease() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(600)).await;
    path(&client).await;
    let mut admin = common::admin(&server).await;
    let guard = client.token_lock("token:renewed").acquire().await.unwrap();
    assert!(guard.is_renewed());
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(guard.is_held(), "lost: {:?}", guard.lost_reason());
    let pttl: i64 = admin.pttl("token:renewed").await.unwrap();
    assert!(pttl > 0 && pttl <= 600, "pttl {pttl}");
    let owner: String = admin.get("token:renewed").await.unwrap();
    assert_eq!(owner, guard.owner_token());
    guard
        .release()
        .await
        .expect("still held after three leases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_the_fixed_lease_ran_out_is_not_held() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client
        .token_lock("token:fixed")
        .with_lease(Duration::from_millis(100));
    let guard = lock.acquire().await.unwrap();
    assert!(!guard.is_renewed());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("a fixed lease runs out");
    // Another owner takes it meanwhile: the release must not delete theirs.
    let other = lock.acquire().await.unwrap();
    assert!(matches!(guard.release().await, Err(Error::NotHeld { .. })));
    let mut admin = common::admin(&server).await;
    let owner: String = admin.get("token:fixed").await.unwrap();
    assert_eq!(
        owner,
        other.owner_token(),
        "the later holder's key was kept"
    );
    other.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_data_in_the_key_is_a_typed_error_or_a_holder() {
    let server = common::server();
    let client = common::client(&server).await;
    path(&client).await;
    let mut admin = common::admin(&server).await;
    // A hash (a reentrant lock of the same name, or anything else).
    let () = admin.hset("token:hash", "field", "1").await.unwrap();
    for fenced in [false, true] {
        let mut lock = client.token_lock("token:hash");
        if fenced {
            lock = lock.fenced();
        }
        assert!(
            matches!(lock.try_acquire().await, Err(Error::WrongType { .. })),
            "fenced {fenced}"
        );
    }
    // A number without a lease: another holder, which never lets go.
    let () = admin.set("token:number", 5).await.unwrap();
    let lock = client.token_lock("token:number");
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert!(matches!(
        lock.acquire_within(Some(Duration::from_millis(200))).await,
        Err(Error::Timeout { .. })
    ));
    // A held key overwritten: with a number, the hold is lost and its
    // release is not held (the number stays); with a hash, the release
    // says the key is no lock.
    let guard = client.token_lock("token:over").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let () = admin.set("token:over", 7).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("an overwritten key is a lost hold");
    assert!(matches!(guard.release().await, Err(Error::NotHeld { .. })));
    let left: i64 = admin.get("token:over").await.unwrap();
    assert_eq!(left, 7, "a release deleted a key it did not hold");
    let guard = client.token_lock("token:over2").acquire().await.unwrap();
    let () = admin.del("token:over2").await.unwrap();
    let () = admin.hset("token:over2", "f", "v").await.unwrap();
    assert!(matches!(
        guard.release().await,
        Err(Error::WrongType { .. })
    ));
    // A token lock and a reentrant lock of one name exclude each other by failing.
    let held = client.lock("token:shared").acquire().await.unwrap();
    assert!(matches!(
        client.token_lock("token:shared").try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_the_holders_token_and_lease_and_refuses_a_hash() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.token_lock("token:status");
    let free = lock.status().await.unwrap();
    assert!(
        !free.held && free.holders.is_empty() && free.ttl.is_none(),
        "{free:?}"
    );

    let guard = lock.acquire().await.unwrap();
    let held = lock.status().await.unwrap();
    assert_eq!(held.name, "token:status");
    assert!(held.held, "{held:?}");
    assert_eq!(held.holders.len(), 1, "{held:?}");
    assert_eq!(held.holders[0].owner, guard.owner_token());
    assert_eq!(held.holders[0].count, 1);
    let pttl: i64 = admin.pttl("token:status").await.unwrap();
    let ttl = held.ttl.expect("a leased key").as_millis() as i64;
    assert!(
        ttl > 0 && ttl >= pttl - 50 && ttl <= pttl + 1_000,
        "ttl {ttl}, PTTL {pttl}"
    );
    // Past the publisher's settling time, the holder is named.
    #[cfg(feature = "holder-records")]
    {
        let named = common::eventually(Duration::from_secs(3), || {
            let lock = lock.clone();
            async move { lock.status().await.unwrap().holders[0].identity.is_some() }
        })
        .await;
        assert!(named, "the token lock's holder was never named");
    }
    // The reentrant lock's handle of the name refuses the string, as its
    // acquire does.
    assert!(matches!(
        client.lock("token:status").status().await,
        Err(Error::WrongType { .. })
    ));
    guard.release().await.unwrap();

    // A string written by another library's `SET NX PX` is a holder too.
    let () = admin
        .pset_ex("token:seeded", "f3a9c2d1", 10_000)
        .await
        .unwrap();
    let seeded = client.token_lock("token:seeded").status().await.unwrap();
    assert!(seeded.held);
    assert_eq!(seeded.holders[0].owner, "f3a9c2d1");

    let () = admin.hset("token:hash", "field", "1").await.unwrap();
    assert!(matches!(
        client.token_lock("token:hash").status().await,
        Err(Error::WrongType { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_any_token_marks_own_guard_lost_and_leaves_a_hash() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.token_lock("token:force");
    assert!(!lock.force_unlock().await.unwrap(), "nothing held it");

    let guard = lock.acquire().await.unwrap();
    // Another client's handle deletes whatever token the key holds.
    assert!(
        other
            .token_lock("token:force")
            .force_unlock()
            .await
            .unwrap()
    );
    let exists: bool = admin.exists("token:force").await.unwrap();
    assert!(!exists, "the key is still there");
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the holder learns of the delete");
    assert!(matches!(guard.release().await, Err(Error::NotHeld { .. })));

    // This client's own guard is marked lost at once, as by Lock::force_unlock.
    let guard = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(guard.lost_reason(), Some(LostReason::ForceUnlocked));
    assert!(!guard.is_held());
    // A waiter takes it after the delete.
    let _next = lock
        .acquire_within(Some(Duration::from_secs(2)))
        .await
        .expect("free after the force-unlock");

    let () = admin.hset("token:hash", "field", "1").await.unwrap();
    assert!(matches!(
        client.token_lock("token:hash").force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    let kept: bool = admin.exists("token:hash").await.unwrap();
    assert!(kept, "a hash was deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_grow_in_acquisition_order_across_clients() {
    let server = common::server();
    let first = common::client(&server).await;
    let second = common::client(&server).await;
    let mut last = 0;
    for round in 0..20 {
        let client = if round % 2 == 0 { &first } else { &second };
        let guard = client
            .token_lock("token:fenced")
            .fenced()
            .acquire()
            .await
            .unwrap();
        let token = guard
            .fencing_token()
            .expect("a fenced lock's guard has a token");
        assert!(token > last, "token {token} after {last}");
        last = token;
        guard.release().await.unwrap();
    }
    let plain = first.token_lock("token:fenced").acquire().await.unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.release().await.unwrap();
}

/// The number of times the server ran `command` so far (`INFO commandstats`).
async fn calls_of(admin: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// A waiter of another client is woken by the server's invalidation of the
/// key it tracks, not by its once-a-second look: several hand-overs in a
/// row each come well before that look would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracking_waiter_is_woken_by_the_invalidation_not_its_one_second_look() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    path(&holder).await;
    let mut slow = 0;
    for round in 0..5 {
        let guard = holder.token_lock("token:tracked").acquire().await.unwrap();
        let lock = waiter.token_lock("token:tracked");
        let waiting = tokio::spawn(async move {
            let guard = lock.acquire_within(Some(Duration::from_secs(10))).await;
            (guard, Instant::now())
        });
        // Parked, tracking the key, and its first look (at 1 s) still far.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let (taken, at) = waiting.await.unwrap();
        let late = at.duration_since(released);
        eprintln!("round {round}: taken {late:?} after the release");
        if late >= Duration::from_millis(500) {
            slow += 1;
        }
        taken.unwrap().release().await.unwrap();
    }
    assert_eq!(slow, 0, "hand-overs that waited for the 1 s look");
}

/// A server whose tracking table is full evicts tracked keys, each with an
/// invalidation: a waiter must not take each such eviction for a change of
/// its key and look again at once (its look tracks its key again, evicting
/// another waiter's, which looks again...): waiting stays a few calls a
/// second, as the loss watch's reads are paced (engine/reread.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_do_not_spin_on_a_full_tracking_table() {
    let server = testkit::RedisServer::builder()
        .arg("tracking-table-max-keys", "1")
        .start()
        .unwrap();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    path(&waiter).await;
    let mut admin = common::admin(&server).await;
    let names = ["token:full-a", "token:full-b"];
    let mut guards = Vec::new();
    for name in names {
        guards.push(holder.token_lock(name).acquire().await.unwrap());
    }
    let mut waiting = Vec::new();
    for name in names {
        let lock = waiter.token_lock(name);
        waiting.push(tokio::spawn(async move {
            lock.acquire_within(Some(Duration::from_secs(3))).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (sets, pttls) = (
        calls_of(&mut admin, "set").await,
        calls_of(&mut admin, "pttl").await,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sets = calls_of(&mut admin, "set").await - sets;
    let pttls = calls_of(&mut admin, "pttl").await - pttls;
    eprintln!("two waiters for 2 s on a full tracking table: {sets} SET, {pttls} PTTL");
    for waiter in waiting {
        assert!(matches!(waiter.await.unwrap(), Err(Error::Timeout { .. })));
    }
    drop(guards);
    // Each waiter looks once a second, plus one look per eviction of its
    // key from the full table, which the server makes on its own timer:
    // 25 looks in 2 s on Redis 7.0, 35-41 on Valkey 9.1.2 (about ten a
    // second per waiter). A spin is a look per round trip: thousands in 2 s.
    assert!(
        pttls < 200 && sets < 200,
        "waiters spun: {sets} SET and {pttls} PTTL in 2 s"
    );
}

/// As `waiters_do_not_spin_on_a_full_tracking_table`, with six waiters on
/// six keys: each look evicts another waiter's key, a chain as long as
/// there are waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_waiters_do_not_spin_on_a_one_key_tracking_table() {
    let server = testkit::RedisServer::builder()
        .arg("tracking-table-max-keys", "1")
        .start()
        .unwrap();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let names: Vec<String> = (0..6).map(|i| format!("token:six-{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(holder.token_lock(name.as_str()).acquire().await.unwrap());
    }
    let mut waiting = Vec::new();
    for name in &names {
        let lock = waiter.token_lock(name.as_str());
        waiting.push(tokio::spawn(async move {
            lock.acquire_within(Some(Duration::from_secs(3))).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let looks = calls_of(&mut admin, "set").await + calls_of(&mut admin, "pttl").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let looks = calls_of(&mut admin, "set").await + calls_of(&mut admin, "pttl").await - looks;
    eprintln!("six waiters for 2 s on a one-key tracking table: {looks} SET and PTTL");
    for waiter in waiting {
        assert!(matches!(waiter.await.unwrap(), Err(Error::Timeout { .. })));
    }
    drop(guards);
    assert!(looks < 600, "waiters spun: {looks} SET and PTTL in 2 s");
}

/// A force unlock racing the holder's release, many times, by this client
/// and by another: exactly one of them deletes the hold; a force unlock by
/// this client never marks a later hold of the key lost; and a renewal
/// after the delete never brings the key back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_racing_the_release_and_the_renewals() {
    let server = common::server();
    let lease = Duration::from_millis(150);
    let client = common::client_with_lease(&server, lease).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    for round in 0..200 {
        let name = "token:race";
        let forcer = if round % 2 == 0 { &client } else { &other };
        let guard = client.token_lock(name).acquire().await.unwrap();
        let force = forcer.token_lock(name);
        let (released, forced) = tokio::join!(
            tokio::spawn(guard.release()),
            tokio::spawn(async move { force.force_unlock().await })
        );
        let released = released.unwrap();
        let forced = forced.unwrap().unwrap();
        match (&released, forced) {
            (Ok(()), false) | (Err(Error::NotHeld { .. }), true) => {}
            other => panic!("round {round}: release and force unlock: {other:?}"),
        }
        let exists: bool = admin.exists(name).await.unwrap();
        assert!(!exists, "round {round}: the key lives on");
        // This client's next hold of the key is not the one forced.
        let next = client.token_lock(name).acquire().await.unwrap();
        assert!(next.is_held(), "round {round}: {:?}", next.lost_reason());
        next.release().await.unwrap();
    }
    // Renewals (every lease/3 = 50 ms) racing a force unlock by another
    // client: the key stays gone.
    for round in 0..20 {
        let guard = client.token_lock("token:renewed").acquire().await.unwrap();
        tokio::time::sleep(Duration::from_millis(7 * round)).await;
        assert!(
            other
                .token_lock("token:renewed")
                .force_unlock()
                .await
                .unwrap()
        );
        tokio::time::sleep(lease * 2).await;
        let exists: bool = admin.exists("token:renewed").await.unwrap();
        assert!(!exists, "round {round}: a renewal wrote the key back");
        assert!(!guard.is_held(), "round {round}: still called held");
        assert!(matches!(guard.release().await, Err(Error::NotHeld { .. })));
    }
}

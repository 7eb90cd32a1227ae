//! The fair lock: FIFO across clients, dead waiters skipped, cancellation, guards.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

async fn line(admin: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    admin.lrange(queue_key(name), 0, -1).await.unwrap()
}

/// Waits until the line of `name` is `len` long.
async fn line_reaches(admin: &redis::aio::MultiplexedConnection, name: &str, len: usize) -> bool {
    common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        let name = name.to_owned();
        async move { line(&mut admin, &name).await.len() == len }
    })
    .await
}

/// Waits (up to 2 s) until one client listens on `channel`.
async fn listening(admin: &redis::aio::MultiplexedConnection, channel: &str) -> bool {
    common::eventually(Duration::from_secs(2), || {
        let mut admin = admin.clone();
        let channel = channel.to_owned();
        async move { common::subscribers(&mut admin, &channel).await == 1 }
    })
    .await
}

/// Asserts that only the fencing counter is left once the holds went.
async fn only_the_counter_is_left(admin: &mut redis::aio::MultiplexedConnection) {
    let keys: Vec<String> = common::keys_once_holders_unnamed(admin).await;
    assert_eq!(keys, vec!["redlatch_lock_token".to_owned()]);
}

#[tokio::test]
async fn ten_waiters_in_separate_clients_acquire_in_line_order() {
    let server = common::server();
    let holder = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.fair_lock("fifo").acquire().await.unwrap();

    let acquired = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..10 {
        let client = common::client(&server).await;
        let acquired = acquired.clone();
        waiters.push(tokio::spawn(async move {
            let guard = client.fair_lock("fifo").acquire().await.unwrap();
            acquired.lock().push((index, guard.owner().to_owned()));
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.release().await.unwrap();
        }));
        // One at a time, so the order they join the line is known.
        assert!(
            line_reaches(&admin, "fifo", index + 1).await,
            "waiter {index} did not join the line"
        );
    }
    let joined = line(&mut admin, "fifo").await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter gets its turn")
            .unwrap();
    }
    eprintln!(
        "10 turns (5 ms each) handed down the line in {:?}",
        released_at.elapsed()
    );
    let acquired = acquired.lock().clone();
    let order: Vec<usize> = acquired.iter().map(|(index, _)| *index).collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>(), "turns out of order");
    let owners: Vec<String> = acquired.into_iter().map(|(_, owner)| owner).collect();
    assert_eq!(owners, joined, "acquired in another order than the line's");
    only_the_counter_is_left(&mut admin).await;
}

#[tokio::test]
async fn a_new_acquire_does_not_overtake_the_line() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let newcomer = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.fair_lock("no-barging").acquire().await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("no-barging");
        async move { lock.acquire().await.unwrap() }
    });
    assert!(line_reaches(&admin, "no-barging", 1).await);

    // The lock goes free without a message to the waiter (its lease ran out, say).
    let _: () = admin.del("no-barging").await.unwrap();
    assert!(
        newcomer
            .fair_lock("no-barging")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "try_acquire took a free lock someone was waiting for"
    );
    let newcomer_wait = newcomer
        .fair_lock("no-barging")
        .acquire_within(Some(Duration::from_millis(100)))
        .await;
    assert!(matches!(
        newcomer_wait,
        Err(redlatch::Error::Timeout { .. })
    ));
    // The waiter's turn comes at its next place renewal, at the latest.
    let turn = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter gets the free lock")
        .unwrap();
    assert!(turn.is_held());
    assert!(line(&mut admin, "no-barging").await.is_empty());
    drop(guard); // already gone from Redis
}

/// Kills the child waiter if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CHILD_URL: &str = "REDLATCH_TEST_FAIR_WAITER_URL";
const PLACE_LEASE: Duration = Duration::from_secs(1);

/// In the child process: wait in line and wait to be killed.
fn wait_until_killed(url: String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let client = redlatch::Client::connect(&url).await.unwrap();
        println!("CONNECTED");
        let lock = client
            .fair_lock("dead-waiter")
            .with_place_lease(PLACE_LEASE);
        let _never = lock.acquire_within(Some(Duration::from_secs(120))).await;
    });
}

#[test]
fn killed_waiter_is_skipped_within_its_place_lease() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        return wait_until_killed(url);
    }
    let server = common::server();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let holder = common::client(&server).await;
        let live = common::client(&server).await;
        let mut admin = common::admin(&server).await;
        let guard = holder.fair_lock("dead-waiter").acquire().await.unwrap();

        let mut child = KillOnDrop(
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "killed_waiter_is_skipped_within_its_place_lease",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_URL, server.url())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
        let mut first = String::new();
        while !first.contains("CONNECTED") {
            first.clear();
            assert!(stdout.read_line(&mut first).unwrap() > 0, "child exited");
        }
        assert!(
            line_reaches(&admin, "dead-waiter", 1).await,
            "child never queued"
        );
        let dead = line(&mut admin, "dead-waiter").await[0].clone();

        let waiting = tokio::spawn({
            let lock = live.fair_lock("dead-waiter").with_place_lease(PLACE_LEASE);
            async move { lock.acquire().await.unwrap() }
        });
        assert!(line_reaches(&admin, "dead-waiter", 2).await);

        child.0.kill().unwrap(); // SIGKILL: the waiter cannot leave the line
        child.0.wait().unwrap();
        // Hands the lock to the dead waiter, first in line, for its place
        // lease (it would renew it to its full lease if it lived).
        guard.release().await.unwrap();
        let released_at = Instant::now();
        let handed: bool = admin.hexists("dead-waiter", &dead).await.unwrap();
        assert!(handed, "the dead waiter was not handed the lock");
        let pttl: i64 = admin.pttl("dead-waiter").await.unwrap();
        assert!(
            pttl <= PLACE_LEASE.as_millis() as i64,
            "handed for {pttl} ms, more than its place lease"
        );

        let turn = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the live waiter is not stuck behind the dead one's hold")
            .unwrap();
        let skipped_after = released_at.elapsed();
        eprintln!("dead waiter's hold gone after {skipped_after:?} (place lease {PLACE_LEASE:?})");
        assert!(
            skipped_after <= PLACE_LEASE * 4,
            "skipped only after {skipped_after:?}"
        );
        assert!(turn.is_held());
        let left: Vec<String> = line(&mut admin, "dead-waiter").await;
        assert!(
            left.is_empty(),
            "the dead waiter is still in line: {left:?}"
        );
        let places: i64 = admin.zcard(timeouts_key("dead-waiter")).await.unwrap();
        assert_eq!(places, 0);
    });
}

#[tokio::test]
async fn cancelled_and_timed_out_waiters_leave_nothing_behind() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.fair_lock("leave").acquire().await.unwrap();

    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("leave");
        async move { lock.acquire().await }
    });
    assert!(line_reaches(&admin, "leave", 1).await);
    let channel = format!(
        "redisson_lock__channel:{{leave}}:{}",
        line(&mut admin, "leave").await[0]
    );
    assert!(
        listening(&admin, &channel).await,
        "the waiter listens on its own channel"
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert!(
        line_reaches(&admin, "leave", 0).await,
        "cancelled waiter still in line"
    );
    assert!(
        common::eventually(Duration::from_secs(3), || {
            let mut admin = admin.clone();
            let channel = channel.clone();
            async move { common::subscribers(&mut admin, &channel).await == 0 }
        })
        .await,
        "the cancelled waiter's subscription must go"
    );

    let timed_out = waiter
        .fair_lock("leave")
        .acquire_within(Some(Duration::from_millis(150)))
        .await;
    assert!(matches!(timed_out, Err(redlatch::Error::Timeout { .. })));
    assert!(line(&mut admin, "leave").await.is_empty());

    guard.release().await.unwrap();
    let mut keys: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
    keys.sort();
    assert_eq!(keys, vec!["redlatch_lock_token".to_owned()]);
}

#[tokio::test]
async fn fair_guard_reenters_excludes_plain_locks_and_reports_loss() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.fair_lock("fair-guard");

    let guard = lock.acquire().await.unwrap();
    let again = guard.reenter().await.unwrap();
    assert_eq!(guard.token(), again.token());
    let count: i64 = admin.hget("fair-guard", guard.owner()).await.unwrap();
    assert_eq!(count, 2);
    // Same hash as the reentrant lock: plain locks (and Redisson's RLock) are excluded.
    assert!(
        other
            .lock("fair-guard")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    drop(again);

    // Renewed past its 300 ms lease by the watchdog.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(guard.is_held());
    let pttl: i64 = admin.pttl("fair-guard").await.unwrap();
    assert!(pttl > 0, "not renewed");

    let _: () = admin.del("fair-guard").await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() resolves once the lock is deleted");
    assert_eq!(guard.lost_reason(), Some(redlatch::LostReason::Gone));
    assert!(matches!(
        guard.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));

    let next = lock.acquire().await.unwrap();
    assert!(next.token() > 1);
}

#[tokio::test]
async fn fair_lock_refuses_bad_input_with_typed_errors() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    assert!(matches!(
        client.fair_lock("").acquire().await,
        Err(redlatch::Error::InvalidName { .. })
    ));
    assert!(matches!(
        client
            .fair_lock("x")
            .with_place_lease(Duration::from_millis(5))
            .acquire()
            .await,
        Err(redlatch::Error::InvalidDuration { .. })
    ));
    let _: () = admin.set(queue_key("typed"), "not a list").await.unwrap();
    assert!(matches!(
        client.fair_lock("typed").try_acquire().await,
        Err(redlatch::Error::WrongType { .. })
    ));
}

#[tokio::test]
async fn acquires_dropped_at_any_point_leave_nothing_behind() {
    let server = common::server();
    let client = common::client(&server).await;
    let holder = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.fair_lock("dropped");
    // Free lock: dropped mid-flight, an attempt that took the lock gives it back.
    for round in 0..60u64 {
        let _ = tokio::time::timeout(Duration::from_micros(round * 20), lock.acquire()).await;
    }
    // Held lock: dropped while joining the line or parked in it.
    let guard = holder.fair_lock("dropped").acquire().await.unwrap();
    for round in 0..60u64 {
        let _ = tokio::time::timeout(Duration::from_micros(round * 50), lock.acquire()).await;
    }
    assert!(
        line_reaches(&admin, "dropped", 0).await,
        "a dropped waiter stayed in line"
    );
    guard.release().await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(3), || {
            let mut admin = admin.clone();
            async move {
                let keys: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
                keys == vec!["redlatch_lock_token".to_owned()]
            }
        })
        .await,
        "left behind: {:?}",
        admin.keys::<_, Vec<String>>("*").await.unwrap()
    );
    assert!(lock.try_acquire().await.unwrap().is_some());
}

#[tokio::test]
async fn a_fixed_lease_is_not_renewed_and_runs_out() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let lease = Duration::from_millis(300);
    let guard = client
        .fair_lock("fixed")
        .with_lease(lease)
        .acquire()
        .await
        .unwrap();
    assert!(!guard.is_renewed());
    assert_eq!(guard.lease(), lease);
    // A waiter in line gets it when the lease runs out, with no release.
    let next = tokio::time::timeout(Duration::from_secs(5), other.fair_lock("fixed").acquire())
        .await
        .expect("the fixed lease ran out")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() resolves when the fixed lease runs out");
    assert_eq!(guard.lost_reason(), Some(redlatch::LostReason::LeaseRanOut));
    assert!(next.token() > guard.token());
}

/// Script calls (`FCALL` and `EVALSHA`) the server ran since its stats were reset.
async fn script_calls(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .unwrap();
    stats
        .lines()
        .filter(|line| line.starts_with("cmdstat_fcall:") || line.starts_with("cmdstat_evalsha:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[tokio::test]
async fn a_waiter_behind_a_holder_parks_after_one_script_call() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.fair_lock("one-look").acquire().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("one-look");
        async move { lock.acquire().await.unwrap() }
    });
    assert!(line_reaches(&admin, "one-look", 1).await);
    // Time to subscribe and look again; a second attempt would come now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Before: 2 acquires (the attempt that took its place, and one more
    // once subscribed, in case a release came in between). Now the one
    // attempt (with deadlock detection turned on, its check too:
    // `trust::deadlock`).
    assert_eq!(
        script_calls(&mut admin).await,
        1,
        "the waiter ran the acquire script more than once before parking"
    );
    guard.release().await.unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the release wakes the parked waiter")
        .unwrap();
    assert!(turn.is_held());
    turn.release().await.unwrap();
}

#[tokio::test]
async fn a_release_hands_the_lock_to_the_first_waiter_in_its_own_call() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.fair_lock("handed").acquire().await.unwrap();
    let first_token = guard.token();
    // A fixed lease: the handed hold needs no renewal, so no other script runs.
    let lease = Duration::from_secs(30);
    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("handed").with_lease(lease);
        async move { lock.acquire().await.unwrap() }
    });
    assert!(line_reaches(&admin, "handed", 1).await);
    let owner = line(&mut admin, "handed").await[0].clone();
    let channel = format!("redisson_lock__channel:{{handed}}:{owner}");
    assert!(
        listening(&admin, &channel).await,
        "the waiter listens on its own channel"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    guard.release().await.unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the release hands the lock to the parked waiter")
        .unwrap();
    assert_eq!(turn.owner(), owner);
    assert!(turn.token() > first_token);
    assert_eq!(turn.lease(), lease);
    let kept: String = admin.hget("handed", "redlatch_token").await.unwrap();
    assert_eq!(
        kept,
        format!("t{}", turn.token()),
        "the token the hash keeps"
    );
    // Before: 2 (the release, then the woken waiter's acquire script).
    assert_eq!(
        script_calls(&mut admin).await,
        1,
        "the hand-off took more than the release's own script call"
    );
    assert!(line(&mut admin, "handed").await.is_empty());
    let terms: bool = admin.exists("redlatch_fair_terms:{handed}").await.unwrap();
    assert!(!terms, "the hand-off terms outlived the hand-off");
    turn.release().await.unwrap();
    only_the_counter_is_left(&mut admin).await;
}

#[tokio::test]
async fn a_handed_hold_lasts_the_place_lease_until_the_watchdog_renews_it() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let place = Duration::from_secs(2);
    let guard = holder.fair_lock("renewed").acquire().await.unwrap();
    let waiting = tokio::spawn({
        let lock = waiter.fair_lock("renewed").with_place_lease(place);
        async move { lock.acquire().await.unwrap() }
    });
    assert!(line_reaches(&admin, "renewed", 1).await);
    let owner = line(&mut admin, "renewed").await[0].clone();
    // The release will hand it the lock for its place lease, W its own.
    let terms: String = admin
        .hget("redlatch_fair_terms:{renewed}", &owner)
        .await
        .unwrap();
    assert_eq!(terms, "2000:300000");
    guard.release().await.unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the hand-off reaches the waiter")
        .unwrap();
    assert!(turn.is_renewed());
    // The watchdog renews at once, to the client's default lease.
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let mut admin = admin.clone();
            async move { admin.pttl::<_, i64>("renewed").await.unwrap() > 3_000 }
        })
        .await,
        "the handed hold was never renewed to the full lease"
    );
    assert!(turn.is_held());
    turn.release().await.unwrap();
}

/// A waiter dropped as the release hands it the lock (the hand-off in
/// Redis, its message on the way or just read) gives the hold back and the
/// next waiter gets it at once, not at the end of the hold's lease (30 s
/// here). Every round drops it a little later, from before the release
/// runs to after the guard was taken; multi-thread runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_as_the_lock_is_handed_to_it_passes_it_on() {
    let server = common::server();
    let holder = common::client(&server).await;
    let dropped_client = common::client(&server).await;
    let next_client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let name = "handed-drop";
    // A place lease as long as the lease: a hold handed to a waiter that
    // never gives it back would stay 30 s.
    let long = Duration::from_secs(30);
    for round in 0..40u64 {
        let guard = holder.fair_lock(name).acquire().await.unwrap();
        let dropped = tokio::spawn({
            let lock = dropped_client.fair_lock(name).with_place_lease(long);
            async move { lock.acquire().await }
        });
        assert!(line_reaches(&admin, name, 1).await, "round {round}");
        let next = tokio::spawn({
            let lock = next_client.fair_lock(name);
            async move { lock.acquire().await }
        });
        assert!(line_reaches(&admin, name, 2).await, "round {round}");
        // Parked: subscribed to its own channel.
        let channel = format!(
            "redisson_lock__channel:{{{name}}}:{}",
            line(&mut admin, name).await[0]
        );
        assert!(listening(&admin, &channel).await);
        // The release runs while the waiter is dropped, a little later
        // each round: before the hand-off, between it and the guard, after.
        let release = tokio::spawn(guard.release());
        tokio::time::sleep(Duration::from_micros(round * 25)).await;
        dropped.abort();
        release.await.unwrap().unwrap();
        if let Ok(taken) = dropped.await {
            // Took its guard before the abort: released as any guard.
            taken.unwrap().release().await.unwrap();
        }
        let turn = tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .unwrap_or_else(|_| panic!("round {round}: the handed hold was never passed on"))
            .unwrap()
            .unwrap();
        turn.release().await.unwrap();
    }
    only_the_counter_is_left(&mut admin).await;
}

/// Polls `waiting` until its owner is parked in line on its own channel,
/// then hands the future back unpolled; the owner field.
async fn park<F: std::future::Future + Unpin>(
    admin: &mut redis::aio::MultiplexedConnection,
    name: &str,
    waiting: &mut F,
) -> String {
    let parked = async {
        assert!(line_reaches(admin, name, 1).await);
        let owner = line(admin, name).await[0].clone();
        let channel = format!("redisson_lock__channel:{{{name}}}:{owner}");
        assert!(listening(admin, &channel).await, "never subscribed");
        owner
    };
    tokio::select! {
        _ = waiting => panic!("the waiter was not meant to get the lock yet"),
        owner = parked => owner,
    }
}

/// A waiter whose task stops polling while it waits is handed the lock
/// (the message is kept for it), and the handed hold runs out before the
/// task is polled again; another client takes the lock meanwhile. When the
/// task comes back it must not take the stale hand-off for a hold: its
/// acquire waits for the other holder. Failed before: the acquire returned
/// a guard at once while the other client held the lock (two holders).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_whose_lease_ran_out_before_the_waiter_looked_is_not_taken() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let name = "stale-hand-off";
    let guard = holder.fair_lock(name).acquire().await.unwrap();
    // A renewed hold is handed for the place lease: 1 s.
    let lock = waiter
        .fair_lock(name)
        .with_place_lease(Duration::from_secs(1));
    let mut waiting = Box::pin(lock.acquire());
    let owner = park(&mut admin, name, &mut waiting).await;
    guard.release().await.unwrap();
    // Handed over, and left to run out unused.
    assert!(
        common::eventually(Duration::from_secs(5), || {
            let mut admin = admin.clone();
            async move { !admin.exists::<_, bool>(name).await.unwrap() }
        })
        .await,
        "the handed hold never ran out"
    );
    let taken = other.fair_lock(name).try_acquire().await.unwrap();
    let taken = taken.expect("the lock ran out: free for anyone");
    let back = tokio::time::timeout(Duration::from_millis(500), waiting.as_mut()).await;
    if let Ok(result) = back {
        let stale = result.unwrap();
        let held: bool = admin.hexists(name, stale.owner()).await.unwrap();
        panic!(
            "the stale hand-off was taken: a guard (held in Redis: {held}) while another client holds the lock"
        );
    }
    taken.release().await.unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter gets the lock once it is free")
        .unwrap();
    assert!(turn.is_held());
    let held: bool = admin.hexists(name, turn.owner()).await.unwrap();
    assert!(held, "the guard's owner holds the lock in Redis");
    let _ = owner;
    turn.release().await.unwrap();
    only_the_counter_is_left(&mut admin).await;
}

/// Bad data in the hand-off terms (`redlatch_fair_terms:{NAME}`: a lease of
/// 0, one PEXPIRE refuses, a key of another type) never costs the release
/// its answer nor hands a hold that is not there: the release succeeds and
/// the waiter is woken instead, and either holds the lock in Redis when its
/// acquire returns or gets a typed error. Failed before: a lease of 0 handed
/// a hold PEXPIRE deleted at once (the waiter's guard held nothing); a lease
/// too long for PEXPIRE failed the release after it had deleted the lock and
/// left the waiter's hold without an expiry; a terms key of another type
/// failed the release after it had deleted the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_hand_off_terms_neither_fail_the_release_nor_hand_a_missing_hold() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let terms_key = |name: &str| format!("redlatch_fair_terms:{{{name}}}");
    for bad in [
        "0:300000",
        "99999999999999999999:300000",
        "1000:99999999999999999999",
        "wrong type",
    ] {
        let name = format!("bad-terms-{}", bad.len());
        let guard = holder.fair_lock(&name).acquire().await.unwrap();
        let lock = waiter.fair_lock(&name);
        let mut waiting = Box::pin(lock.acquire());
        let owner = park(&mut admin, &name, &mut waiting).await;
        if bad == "wrong type" {
            let _: () = admin.del(terms_key(&name)).await.unwrap();
            let _: () = admin.set(terms_key(&name), bad).await.unwrap();
        } else {
            let _: () = admin.hset(terms_key(&name), &owner, bad).await.unwrap();
        }
        // A terms key of another type fails the waiter's own next attempt
        // (WrongType), which may come before the release.
        let (released, turn) = tokio::join!(
            guard.release(),
            tokio::time::timeout(Duration::from_secs(10), waiting)
        );
        assert!(released.is_ok(), "{bad}: the release failed: {released:?}");
        let turn = turn.unwrap_or_else(|_| panic!("{bad}: the waiter was never woken"));
        match turn {
            Ok(turn) => {
                let held: bool = admin.hexists(&name, turn.owner()).await.unwrap();
                assert!(held, "{bad}: a guard whose owner does not hold the lock");
                let pttl: i64 = admin.pttl(&name).await.unwrap();
                assert!(pttl > 0, "{bad}: the hold has no expiry ({pttl})");
                turn.release().await.unwrap();
            }
            Err(error) => assert!(
                matches!(error, redlatch::Error::WrongType { .. }),
                "{bad}: {error:?}"
            ),
        }
        let _: () = admin.del(terms_key(&name)).await.unwrap();
    }
}

/// The subscription connections are killed (`CLIENT KILL TYPE pubsub`) as
/// the release hands the lock over, so the hand-off message may be lost:
/// the waiter still takes the handed hold (its next attempt finds the hold
/// its own), well within the hold's lease, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_whose_message_is_lost_with_the_subscriber_is_still_taken() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let name = "hand-off-killed";
    for round in 0..5u64 {
        let guard = holder.fair_lock(name).acquire().await.unwrap();
        let lock = waiter.fair_lock(name);
        let mut waiting = Box::pin(lock.acquire());
        park(&mut admin, name, &mut waiting).await;
        let kill = async {
            tokio::time::sleep(Duration::from_micros(round * 300)).await;
            common::kill_subscriptions(&mut admin.clone()).await;
        };
        let (released, ()) = tokio::join!(guard.release(), kill);
        released.unwrap();
        let started = Instant::now();
        let turn = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap_or_else(|_| panic!("round {round}: the handed hold was never taken"))
            .unwrap();
        // The hold was handed for the place lease (5 s): taken before it ran out.
        assert!(started.elapsed() < Duration::from_secs(5), "round {round}");
        let held: bool = admin.hexists(name, turn.owner()).await.unwrap();
        assert!(
            held,
            "round {round}: the guard's owner does not hold the lock"
        );
        turn.release().await.unwrap();
    }
    assert!(line(&mut admin, name).await.is_empty());
    only_the_counter_is_left(&mut admin).await;
}

/// A waiter whose bounded wait ends as the release hands it the lock
/// either returns a guard it holds in Redis or times out and gives the
/// hold back: the next waiter in line gets the lock at once, not at the
/// end of the handed lease (30 s here). Multi-thread, 20 rounds, each
/// ending the wait a little later against the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_timing_out_as_the_lock_is_handed_to_it_leaves_no_hold() {
    let server = common::server();
    let holder = common::client(&server).await;
    let timing_out = common::client(&server).await;
    let next_client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let name = "handed-timeout";
    let long = Duration::from_secs(30);
    let wait = Duration::from_millis(400);
    for round in 0..20u64 {
        let guard = holder.fair_lock(name).acquire().await.unwrap();
        let started = Instant::now();
        let first = tokio::spawn({
            let lock = timing_out.fair_lock(name).with_place_lease(long);
            async move { lock.acquire_within(Some(wait)).await }
        });
        assert!(line_reaches(&admin, name, 1).await, "round {round}");
        let next = tokio::spawn({
            let lock = next_client.fair_lock(name);
            async move { lock.acquire().await }
        });
        assert!(line_reaches(&admin, name, 2).await, "round {round}");
        // Release about when the first waiter's wait ends.
        let at = wait - Duration::from_millis(10) + Duration::from_millis(round);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        guard.release().await.unwrap();
        match first.await.unwrap() {
            Ok(taken) => {
                let held: bool = admin.hexists(name, taken.owner()).await.unwrap();
                assert!(
                    held,
                    "round {round}: a guard whose owner does not hold the lock"
                );
                taken.release().await.unwrap();
            }
            Err(error) => assert!(
                matches!(
                    error,
                    redlatch::Error::Timeout { .. } | redlatch::Error::ResponseTimeout { .. }
                ),
                "round {round}: {error:?}"
            ),
        }
        let turn = tokio::time::timeout(Duration::from_secs(10), next)
            .await
            .unwrap_or_else(|_| panic!("round {round}: the handed hold was never given back"))
            .unwrap()
            .unwrap();
        turn.release().await.unwrap();
    }
    assert!(line(&mut admin, name).await.is_empty());
    only_the_counter_is_left(&mut admin).await;
}

/// A plain lock's waiter marks the fair hold it found (`redlatch_waiters`,
/// the hash is shared). When the fair hold's count cannot be counted, its
/// release removes the owner's field; the mark must go with it, or it alone
/// keeps the key, a lock nobody holds until the lease ends. Failed before:
/// the key stayed with the mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_hold_that_cannot_be_counted_leaves_no_waiters_mark_holding_the_lock() {
    let server = common::server();
    let holder = common::client(&server).await;
    let plain = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let name = "fair-mark";
    let guard = holder.fair_lock(name).acquire().await.unwrap();
    let waiting = tokio::spawn({
        let lock = plain.lock(name);
        async move { lock.acquire_within(Some(Duration::from_secs(20))).await }
    });
    let marked = common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        async move {
            let mark: Option<String> = admin.hget(name, "redlatch_waiters").await.unwrap();
            mark.is_some()
        }
    })
    .await;
    assert!(marked, "the plain waiter did not mark the fair hold");
    let _: () = admin
        .hset(name, guard.owner(), "not a count")
        .await
        .unwrap();
    let released = guard.release().await;
    assert!(
        matches!(released, Err(redlatch::Error::WrongType { .. })),
        "{released:?}"
    );
    // Free, or already taken by the plain waiter (an owner field): never
    // kept by no owner at all.
    let left: Vec<String> = admin.hkeys(name).await.unwrap();
    let owned = left.iter().any(|field| field.contains(':'));
    assert!(left.is_empty() || owned, "the lock is kept by {left:?}");
    waiting.abort();
}

/// Hand-offs under churn: three clients, four tasks each, on one fair
/// lock with a place lease of 1 s (so renewed holds are handed over), each
/// task acquiring with a random bounded wait, or dropping its acquire after
/// a random time, or waiting for good. Never two holders at once, tokens
/// rise in the order of the critical sections, and once all is done the
/// line is empty and only the counter is left (no hold nobody owns, no
/// waiter left in line). Multi-thread; the seed is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_offs_under_drops_and_timeouts_never_make_two_holders_nor_leave_anything() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let name = "churn";
    let inside = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicU64::new(0));
    let taken = Arc::new(AtomicU64::new(0));
    let mut seeds = common::Rng::from_env();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = common::client(&server).await;
        for _ in 0..4 {
            let lock = client
                .fair_lock(name)
                .with_place_lease(Duration::from_secs(1));
            let (inside, last_token, taken) = (inside.clone(), last_token.clone(), taken.clone());
            let mut rng = common::Rng::new(seeds.below(u64::MAX));
            tasks.push(tokio::spawn(async move {
                for _ in 0..8 {
                    let patience = Duration::from_millis(20 + rng.below(300));
                    let guard = match rng.below(3) {
                        0 => lock.acquire_within(Some(patience)).await.ok(),
                        1 => tokio::time::timeout(patience, lock.acquire())
                            .await
                            .ok()
                            .map(Result::unwrap),
                        _ => Some(lock.acquire().await.unwrap()),
                    };
                    let Some(guard) = guard else { continue };
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    let before = last_token.swap(guard.token(), Ordering::SeqCst);
                    assert!(guard.token() > before, "tokens went back");
                    tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
                    inside.store(false, Ordering::SeqCst);
                    taken.fetch_add(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("a task waited past its turn: a hold nobody owns?")
            .unwrap();
    }
    assert!(taken.load(Ordering::SeqCst) > 0);
    // Dropped waiters leave the line from tasks of their own.
    assert!(line_reaches(&admin, name, 0).await, "waiters left in line");
    only_the_counter_is_left(&mut admin).await;
}

//! Lease renewal, lost-lock detection, fixed leases, and crashed holders.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

#[tokio::test]
async fn watchdog_keeps_a_one_second_lease_for_four_seconds() {
    let server = common::server();
    let holder = common::client_with_lease(&server, Duration::from_secs(1)).await;
    let rival = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.lock("renewed").acquire().await.unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let pttl: i64 = admin.pttl("renewed").await.unwrap();
        assert!(
            pttl > 0,
            "lease ran out at {:?} (pttl {pttl})",
            started.elapsed()
        );
        assert!(
            rival.lock("renewed").try_acquire().await.unwrap().is_none(),
            "another client took a renewed lock"
        );
        assert!(guard.is_held());
        assert_eq!(guard.lost_reason(), None);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    guard.release().await.expect("still held after 4 leases");
}

#[tokio::test]
async fn deleted_key_makes_lost_resolve_within_one_renewal_period() {
    let server = common::server();
    let lease = Duration::from_millis(900);
    let client = common::client_with_lease(&server, lease).await;
    let mut admin = common::admin(&server).await;
    let guard = client.lock("deleted-under-me").acquire().await.unwrap();
    let () = admin.del("deleted-under-me").await.unwrap();
    let deleted_at = Instant::now();
    tokio::time::timeout(lease / 3 + Duration::from_millis(250), guard.lost())
        .await
        .expect("lost() within one renewal period (plus scheduling slack)");
    assert!(!guard.is_held());
    assert_eq!(guard.lost_reason(), Some(redlatch::LostReason::Gone));
    assert!(deleted_at.elapsed() <= lease / 3 + Duration::from_millis(250));
    assert!(matches!(
        guard.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
}

#[tokio::test]
async fn fixed_lease_runs_out_and_lost_resolves() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("fixed");
    let guard = lock
        .clone()
        .with_lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    assert!(!guard.is_renewed());
    assert!(lock.try_acquire().await.unwrap().is_none());
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() when the fixed lease runs out");
    assert!(!guard.is_held());
    assert_eq!(guard.lost_reason(), Some(redlatch::LostReason::LeaseRanOut));
    let next = lock
        .acquire_within(Some(Duration::from_secs(2)))
        .await
        .expect("free once the lease ran out");
    assert!(next.token() > guard.token());
}

#[tokio::test]
async fn renewals_are_batched_across_many_held_locks() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let mut guards = Vec::new();
    for index in 0..250 {
        guards.push(
            client
                .lock(format!("many:{index}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    assert_eq!(client.held_locks(), 250);
    let before = client.renewal_round_trips();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let trips = client.renewal_round_trips() - before;
    // One script call per lock per 100 ms period would be ~2,500 calls.
    assert!(trips >= 5, "the watchdog did not renew ({trips} calls)");
    assert!(
        trips <= 150,
        "renewals not batched: {trips} calls for 250 locks in 1 s"
    );
    assert!(guards.iter().all(|guard| guard.is_held()));
    let mut admin = common::admin(&server).await;
    let pttl: i64 = admin.pttl("many:0").await.unwrap();
    assert!(pttl > 0);
}

#[tokio::test]
async fn locks_and_permits_are_renewed_by_one_engine_in_shared_batches() {
    let server = common::server();
    let lease = Duration::from_millis(600);
    let client = common::client_with_lease(&server, lease).await;
    let slots = client.permit_semaphore("shared-engine");
    slots.try_set_permits(150).await.unwrap();
    let mut permits = Vec::new();
    for _ in 0..150 {
        permits.push(slots.acquire().await.unwrap());
    }
    // Permits alone: the client's renewal calls count them (one engine).
    tokio::time::sleep(lease).await;
    let before = client.renewal_round_trips();
    tokio::time::sleep(lease * 3).await;
    let permit_trips = client.renewal_round_trips() - before;
    let mut guards = Vec::new();
    for index in 0..150 {
        guards.push(
            client
                .lock(format!("shared:{index}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(lease).await;
    let before = client.renewal_round_trips();
    tokio::time::sleep(lease * 3).await;
    let all_trips = client.renewal_round_trips() - before;
    // About 9 renewal periods of 200 ms each time (timer slack may make it
    // 8): 150 permits take 2 calls a period, 150 permits and 150 locks 4
    // (one script per call, up to 100 holds each); a little more when holds
    // acquired apart are due apart.
    eprintln!("calls in ~9 periods: permits {permit_trips}, permits and locks {all_trips}");
    assert!(
        (2 * 7..=2 * 9 * 2).contains(&permit_trips),
        "150 permits: {permit_trips} calls in 9 periods"
    );
    assert!(
        (4 * 7..=4 * 9 * 2).contains(&all_trips),
        "150 permits and 150 locks: {all_trips} calls in 9 periods"
    );
    assert!(permits.iter().all(|permit| permit.is_held()));
    assert!(guards.iter().all(|guard| guard.is_held()));
    assert_eq!(client.held_locks(), 150, "permits are not locks");
    let mut admin = common::admin(&server).await;
    let pttl: i64 = admin.pttl("shared:0").await.unwrap();
    assert!(pttl > 0);
    assert_eq!(slots.available_permits().await.unwrap(), 0);
}

/// Kills the child holder if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CHILD_URL: &str = "REDLATCH_TEST_HOLDER_URL";

/// In the child process: hold the lock and wait to be killed.
fn hold_until_killed(url: String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let client = redlatch::Client::builder(&url)
            .default_lease(Duration::from_secs(2))
            .connect()
            .await
            .unwrap();
        let guard = client.lock("crashing-holder").acquire().await.unwrap();
        println!("HELD {}", guard.token());
        tokio::time::sleep(Duration::from_secs(120)).await;
    });
}

#[test]
fn killed_holder_frees_lock_within_lease_plus_one_second() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        return hold_until_killed(url);
    }
    let server = common::server();
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "killed_holder_frees_lock_within_lease_plus_one_second",
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
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let held = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            // libtest prints "test NAME ... " on the same line, before the child's output.
            line.split_once("HELD ")
                .map(|(_, token)| token.trim().to_owned())
        })
        .expect("child reports it holds the lock");
    let child_token: u64 = held.parse().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = common::client(&server).await;
        let lock = client.lock("crashing-holder");
        // Renewed by the child's watchdog past its 2 s lease.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            lock.try_acquire().await.unwrap().is_none(),
            "child's watchdog stopped renewing"
        );

        child.0.kill().unwrap(); // SIGKILL: no release, no cleanup
        child.0.wait().unwrap();
        let killed_at = Instant::now();
        let guard = lock
            .acquire_within(Some(Duration::from_secs(10)))
            .await
            .expect("lock comes free after the holder dies");
        let freed_after = killed_at.elapsed();
        assert!(
            freed_after <= Duration::from_secs(3),
            "lock free only {freed_after:?} after the kill (lease 2 s)"
        );
        assert!(guard.token() > child_token);
    });
}

/// One client's renewal batches mix every kind of owner: anonymous (kept
/// as a number), named (kept as text, re-entered, and named like an
/// anonymous owner's tail: "0", "18446744073709551615"), a token lock's
/// token, read and write holds. A rebuilt owner text that differed from
/// the one written at acquire would make a renewal or the loss watch call
/// the hold lost: every hold must outlive ten leases, and release cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_mixing_numbered_and_named_owners_keep_every_hold() {
    let server = common::server();
    let lease = Duration::from_millis(300);
    let client = common::client_with_lease(&server, lease).await;
    let other = common::client(&server).await;
    for round in 0..3 {
        let mut guards = Vec::new();
        let mut reentered = Vec::new();
        for i in 0..20 {
            guards.push(
                client
                    .lock(format!("mix:{round}:anon:{i}"))
                    .acquire()
                    .await
                    .unwrap(),
            );
        }
        for owner in [
            "worker",
            "0",
            "18446744073709551615",
            "99999999999999999999",
            " 7",
        ] {
            let lock = client
                .lock(format!("mix:{round}:named:{owner}"))
                .with_owner(owner);
            let outer = lock.acquire().await.unwrap();
            reentered.push(outer.reenter().await.unwrap());
            reentered.push(lock.acquire().await.unwrap());
            guards.push(outer);
        }
        let mut tokens = Vec::new();
        for i in 0..10 {
            let lock = client.token_lock(format!("mix:{round}:token:{i}"));
            tokens.push(lock.acquire().await.unwrap());
        }
        let read = client
            .read_write_lock(format!("mix:{round}:rw"))
            .with_owner("reader")
            .read()
            .await
            .unwrap();
        let write = client
            .read_write_lock(format!("mix:{round}:rw2"))
            .write()
            .await
            .unwrap();
        tokio::time::sleep(lease * 10).await;
        for guard in guards.iter().chain(&reentered) {
            assert!(
                guard.is_held(),
                "{}: {:?}",
                guard.owner(),
                guard.lost_reason()
            );
            assert!(
                other
                    .lock(guard.name())
                    .try_acquire()
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        for token in &tokens {
            assert!(token.is_held(), "{}", token.owner_token());
            let status = other.token_lock(token.name()).status().await.unwrap();
            assert_eq!(status.holders[0].owner, token.owner_token());
        }
        assert!(read.is_held() && write.is_held());
        for guard in reentered.into_iter().chain(guards) {
            guard.release().await.unwrap();
        }
        for token in tokens {
            token.release().await.unwrap();
        }
        read.release().await.unwrap();
        write.release().await.unwrap();
    }
}

//! The engine's hold bookkeeping: leases believed from what Redis did,
//! holds shared across lease modes, named owners re-entering at once, one
//! deadline per call.

use std::time::{Duration, Instant};

use redlatch::Error;
use testkit::{Direction, LinkFaults, Proxy};

use crate::common;
use crate::common::client_at;
use crate::support::pttl;

/// Defect 1 (safety). A re-entry that meets NOSCRIPT runs two round trips
/// after it was sent, so a renewal sent after it can run before it. Redis
/// must never end with a shorter lease than the guards believe: while the
/// guards say `is_held()`, nobody else may acquire the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_delayed_by_a_flushed_script_cache_never_leaves_two_holders() {
    for round in 0..3 {
        let server = common::server();
        let proxy = Proxy::start(server.addr()).unwrap();
        // Scripts by EVALSHA: a flushed cache loses them one by one.
        let client = common::evalsha_client_at(&proxy.url(), Duration::from_secs(1)).await;
        let rival = common::client(&server).await;
        let name = format!("noscript:{round}");
        let outer = client.lock(&name).acquire().await.unwrap();

        // Only the renewal script is in the cache: the re-entry meets NOSCRIPT.
        let mut admin = common::admin(&server).await;
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(include_str!("../../src/base/renew.lua"))
            .query_async(&mut admin)
            .await
            .unwrap();
        let slow = LinkFaults {
            latency: Duration::from_millis(50),
            ..LinkFaults::default()
        };
        proxy.set(Direction::ToServer, slow);
        let reentry = tokio::spawn(async move {
            let inner = outer.reenter().await;
            (outer, inner)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // A longer lease: the renewal it brings forward overtakes the re-entry.
        let mut settings = client.settings();
        settings.default_lease = Duration::from_secs(30);
        client.update_settings(settings).unwrap();
        let (outer, inner) = reentry.await.unwrap();
        let inner = inner.unwrap();
        proxy.set(Direction::ToServer, LinkFaults::default());

        // For three seconds (three of the old leases) nobody else may get in
        // while our guards believe they hold it.
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if let Some(rival_guard) = rival.lock(&name).try_acquire().await.unwrap() {
                let (outer_held, inner_held) = (outer.is_held(), inner.is_held());
                let left = pttl(&server, &name).await;
                drop(rival_guard);
                panic!(
                    "round {round}: another client acquired while our guards say held \
                     (outer {outer_held}, inner {inner_held}); PTTL now {left}"
                );
            }
            assert!(outer.is_held() && inner.is_held(), "round {round}: lost");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Defect 3. A named owner's re-entry with a short fixed lease must not
/// shorten the lease its watchdog guard relies on: the lock stays held (and
/// renewed) while the watchdog guard lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fixed_lease_reentry_never_shortens_a_watchdog_hold() {
    let server = common::server();
    let client = common::client(&server).await;
    let rival = common::client(&server).await;
    let lock = client.lock("mixed").with_owner("request-7");
    let watched = lock.acquire().await.unwrap();
    let fixed = lock
        .clone()
        .with_lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    assert_eq!(watched.token(), fixed.token(), "a re-entry");
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let taken = rival.lock("mixed").try_acquire().await.unwrap();
        assert!(
            taken.is_none(),
            "another client took the lock while the watchdog guard lives (it says held: {})",
            watched.is_held()
        );
        assert!(watched.is_held());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        pttl(&server, "mixed").await > 1_000,
        "the watchdog lease was cut"
    );
}

/// Defect 7. `acquire()` re-entering a fixed-lease hold asks for renewal:
/// the hold is renewed while that guard lives, past the fixed lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_reentry_of_a_fixed_lease_hold_is_renewed() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(600)).await;
    let rival = common::client(&server).await;
    let lock = client.lock("fixed-then-watched").with_owner("request-8");
    let fixed = lock
        .clone()
        .with_lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    let watched = lock.acquire().await.unwrap();
    assert!(watched.is_renewed());
    assert_eq!(fixed.token(), watched.token());
    // Three fixed leases later, still ours.
    let until = Instant::now() + Duration::from_millis(1800);
    while Instant::now() < until {
        assert!(
            watched.is_held(),
            "the watchdog guard's hold was not renewed"
        );
        let taken = rival
            .lock("fixed-then-watched")
            .try_acquire()
            .await
            .unwrap();
        assert!(taken.is_none(), "another client took a renewed hold");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(fixed);
    watched.release().await.unwrap();
}

/// Defect 4. A named owner that holds the lock re-enters at once, even with
/// another task of the same client queued for the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_owner_reenters_at_once_past_a_local_waiter() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_secs(5)).await;
    let holder = client.lock("busy").with_owner("request-42");
    let first = holder.acquire().await.unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.lock("busy").acquire().await.map(|_| ()) })
    };
    // The waiter has tried once and parked.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..5 {
        let started = Instant::now();
        let again = tokio::time::timeout(Duration::from_secs(2), holder.acquire())
            .await
            .expect("the re-entry waited behind the local waiter")
            .unwrap();
        assert_eq!(again.token(), first.token());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "re-entry took {:?}",
            started.elapsed()
        );
        again.release().await.unwrap();
    }
    first.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter got the lock after the release")
        .unwrap()
        .unwrap();
}

/// Defect 6. Two acquires by one named owner that leave in one batch: one
/// is fresh, the other re-enters, and both guards hold (Redis counts 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_acquires_of_one_named_owner_in_one_batch_both_hold() {
    let server = common::server();
    // Latency keeps one call in flight while the pair queues behind it.
    let proxy = Proxy::start(server.addr()).unwrap();
    proxy.set_both(LinkFaults {
        latency: Duration::from_millis(5),
        ..LinkFaults::default()
    });
    let client = client_at(&proxy.url(), redlatch::Settings::DEFAULT_LEASE).await;
    let mut admin = common::admin(&server).await;
    let mut lost = 0;
    for round in 0..100 {
        let name = format!("pair:{round}");
        let plug = client.lock(format!("plug:{round}"));
        let plug = tokio::spawn(async move { plug.try_acquire().await });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let lock = client.lock(&name).with_owner("worker");
        let (a, b) = (lock.clone(), lock.clone());
        let a = tokio::spawn(async move { a.try_acquire().await });
        let b = tokio::spawn(async move { b.try_acquire().await });
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let (a, b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
        drop(plug.await.unwrap().unwrap());
        assert_eq!(a.token(), b.token());
        let count: i64 = redis::cmd("HGET")
            .arg(&name)
            .arg(a.owner())
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(count, 2, "round {round}");
        if !a.is_held() || !b.is_held() {
            lost += 1;
        }
        let (a, b) = (a.release().await, b.release().await);
        if a.is_err() || b.is_err() {
            lost += 1;
        }
    }
    assert_eq!(lost, 0, "guards reported lost in {lost} of 100 rounds");
    assert_eq!(common::holds_left(&mut admin, "pair:").await, 0);
}

/// Defect 9. One deadline per call: `acquire_timeout` behind a queued
/// local waiter gives up when its own wait is over, not a second wait later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_timeout_behind_a_local_waiter_keeps_one_deadline() {
    let server = common::server();
    let client = common::client(&server).await;
    let holder = common::client(&server).await;
    let _held = holder.lock("queued").acquire().await.unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move { client.lock("queued").acquire().await.map(|_| ()) })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..3 {
        let wait = Duration::from_secs(1);
        let started = Instant::now();
        let outcome = client.lock("queued").acquire_within(Some(wait)).await;
        let took = started.elapsed();
        assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
        assert!(
            took < wait + Duration::from_millis(450),
            "a 1 s wait took {took:?}"
        );
    }
    waiter.abort();
}

/// A guard whose hold was force-unlocked, after the same named owner took
/// the lock afresh with a short fixed lease: the stale guard's `reenter()`
/// answers `NotHeld` and leaves the new hold's lease alone. (Before: the
/// re-entry was sent, re-entered the new hold, was given back, and left the
/// stale guard's 30 s lease on a hold its guard believes runs out in
/// 400 ms; the model's long run found it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_guard_never_reenters_a_newer_hold_of_its_owner() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_secs(30)).await;
    for round in 0..10 {
        let name = format!("stale-reentry-{round}");
        let lock = client.lock(&name).with_owner("worker");
        let stale = lock.acquire().await.unwrap();
        assert!(lock.force_unlock().await.unwrap());
        let fresh = lock
            .clone()
            .with_lease(Duration::from_millis(400))
            .acquire()
            .await
            .unwrap();
        assert!(fresh.token() > stale.token());
        match stale.reenter().await {
            Err(Error::NotHeld { .. }) => {}
            other => panic!(
                "round {round}: a stale guard's reenter gave {:?}",
                other.map(|guard| guard.token())
            ),
        }
        let pttl = pttl(&server, &name).await;
        assert!(
            (0..=400).contains(&pttl),
            "round {round}: the new 400 ms hold has PTTL {pttl} ms after a stale guard's re-entry"
        );
        fresh.release().await.unwrap();
    }
}

/// Red team of the watchdog's slab in pages and its packed order: 1,200
/// holds across five pages, a third released out of order (from the
/// end, every third: free places scattered over the pages), 400 new holds
/// taken on those places, then three lease periods: every hold renewed on
/// its own place (none lost, every key's lease fresh), in batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_on_reused_slab_places_across_pages_are_all_renewed() {
    const HOLDS: usize = 1_200;
    const LEASE: Duration = Duration::from_millis(900);
    let server = crate::common::server();
    let client = crate::common::client_with_lease(&server, LEASE).await;
    let acquires = (0..HOLDS).map(|index| {
        let lock = client.lock(format!("paged:{index}"));
        async move { lock.acquire().await }
    });
    let mut guards: Vec<Option<redlatch::Guard>> = futures_util::future::try_join_all(acquires)
        .await
        .unwrap()
        .into_iter()
        .map(Some)
        .collect();
    for index in (0..HOLDS).rev().step_by(3) {
        guards[index].take().unwrap().release().await.unwrap();
    }
    let acquires = (0..HOLDS / 3).map(|index| {
        let lock = client.lock(format!("paged:new:{index}"));
        async move { lock.acquire().await }
    });
    guards.extend(
        futures_util::future::try_join_all(acquires)
            .await
            .unwrap()
            .into_iter()
            .map(Some),
    );
    let held: Vec<&redlatch::Guard> = guards.iter().flatten().collect();
    assert_eq!(held.len(), HOLDS);
    assert_eq!(client.held_locks(), HOLDS);
    let before = client.renewal_round_trips();
    tokio::time::sleep(LEASE * 3).await;
    let trips = client.renewal_round_trips() - before;
    let lost: Vec<&str> = held
        .iter()
        .filter(|guard| !guard.is_held() || guard.lost_reason().is_some())
        .map(|guard| guard.name())
        .collect();
    assert!(lost.is_empty(), "{} holds lost: {lost:?}", lost.len());
    let mut admin = crate::common::admin(&server).await;
    let mut pipeline = redis::pipe();
    for guard in &held {
        pipeline.cmd("PTTL").arg(guard.name());
    }
    let pttls: Vec<i64> = pipeline.query_async(&mut admin).await.unwrap();
    let stale: Vec<(&str, i64)> = held
        .iter()
        .zip(&pttls)
        .filter(|(_, pttl)| **pttl < (LEASE / 3).as_millis() as i64)
        .map(|(guard, pttl)| (guard.name(), *pttl))
        .collect();
    assert!(stale.is_empty(), "keys not renewed: {stale:?}");
    // A renewal every lease/3, HOLDS/100 batches each: about 108.
    eprintln!("{trips} renewal round trips for {HOLDS} holds over three leases");
    assert!(
        (24..=500).contains(&trips),
        "{trips} renewal round trips for {HOLDS} holds over three leases"
    );
}

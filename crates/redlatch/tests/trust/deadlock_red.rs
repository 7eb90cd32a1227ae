//! Deadlock detection, tried as an adversary would: waits that close no
//! cycle (a slow holder, chains, stale or odd wait-for edges, crowds of
//! readers, a guard moved between tasks) must never be refused, and real
//! cycles (of one, two, three and sixteen locks, closed while a waiter is
//! parked for a long lease, or through waiters this client queued) must be
//! refused to exactly one party, soon. Bad data in the wait-for keys, a
//! server that refuses the check's write, and the ways a wait ends early
//! (a single try, a cancelled or timed-out acquire) must not cost an
//! acquire anything but the detection.
//!
//! Each test that found a defect says what used to happen; the party
//! rules' tests run with detection off (the default) and on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::Error;
use tokio::sync::{Barrier, Semaphore, oneshot};

use crate::common;
use crate::deadlock_support::{
    LONG, detecting_under, edges, is_deadlock, said, until_edges, until_no_edge,
    writer_closes_a_cycle_through_a_reader,
};

/// How long after a cycle closes its closer must be refused here: the
/// issue asks for 100 ms; the bound leaves room for a loaded machine.
const SOON: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------
// False deadlocks: waits that close no cycle.
// ---------------------------------------------------------------------

/// A slow holder and a chain of waiters behind it, across four clients
/// and every kind that takes part (lock, fair lock, read-write lock with
/// many readers and a writer, spin lock): nobody is ever refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_holder_and_chains_behind_it_are_never_a_deadlock() {
    let server = common::server();
    let clients = [
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    ];
    for round in 0..5 {
        let a = format!("dl-red:slow:{round}:a");
        let fair = format!("dl-red:slow:{round}:fair");
        let rw = format!("dl-red:slow:{round}:rw");
        let spin = format!("dl-red:slow:{round}:spin");
        let (ready, mut readies) = tokio::sync::mpsc::channel::<()>(32);
        let mut tasks = Vec::new();
        // The slow one: holds `a` a while, waits for nothing.
        {
            let (c, a, ready) = (clients[0].clone(), a.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                let held = c
                    .lock(a.as_str())
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                ready.send(()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(150)).await;
                drop(held);
                Ok::<(), String>(())
            }));
        }
        readies.recv().await.unwrap();
        // Holds the fair lock, waits for `a`.
        {
            let (c, a, fair, ready) = (clients[1].clone(), a.clone(), fair.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                let held = c
                    .fair_lock(fair.as_str())
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                ready.send(()).await.unwrap();
                let second = c.lock(a.as_str()).acquire_within(Some(LONG)).await;
                let second = second.map_err(|e| format!("fair holder waiting for a: {e}"))?;
                drop((second, held));
                Ok(())
            }));
        }
        readies.recv().await.unwrap();
        // Readers: one waits for the fair lock while reading, four read a while.
        for reader in 0..5 {
            let (c, fair, rw, ready) =
                (clients[2].clone(), fair.clone(), rw.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                let read = c
                    .read_write_lock(rw.as_str())
                    .read()
                    .await
                    .map_err(|e| e.to_string())?;
                ready.send(()).await.unwrap();
                if reader == 0 {
                    let second = c.fair_lock(fair.as_str()).acquire_within(Some(LONG)).await;
                    let second = second.map_err(|e| format!("reader waiting for fair: {e}"))?;
                    drop(second);
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                drop(read);
                Ok(())
            }));
        }
        for _ in 0..5 {
            readies.recv().await.unwrap();
        }
        // A spin lock's holder waits to write (for every reader).
        {
            let (c, rw, spin, ready) =
                (clients[3].clone(), rw.clone(), spin.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                let held = c
                    .spin_lock(spin.as_str())
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                ready.send(()).await.unwrap();
                let write = c
                    .read_write_lock(rw.as_str())
                    .write_within(Some(LONG))
                    .await;
                let write = write.map_err(|e| format!("writer: {e}"))?;
                drop((write, held));
                Ok(())
            }));
        }
        readies.recv().await.unwrap();
        // And the last waits for the spin lock; a late reader queues behind the writer.
        {
            let (c, spin) = (clients[0].clone(), spin.clone());
            tasks.push(tokio::spawn(async move {
                let held = c.spin_lock(spin.as_str()).acquire_within(Some(LONG)).await;
                drop(held.map_err(|e| format!("spin waiter: {e}"))?);
                Ok(())
            }));
            let (c, rw) = (clients[1].clone(), rw.clone());
            tasks.push(tokio::spawn(async move {
                let read = c.read_write_lock(rw.as_str()).read_within(Some(LONG)).await;
                drop(read.map_err(|e| format!("late reader: {e}"))?);
                Ok(())
            }));
        }
        for task in tasks {
            if let Err(error) = task.await.unwrap() {
                panic!("round {round}: a wait with no cycle failed: {error}");
            }
        }
    }
}

/// A client with deadlock detection `on` (off by default).
async fn client_detecting(server: &testkit::RedisServer, on: bool) -> redlatch::Client {
    if on {
        common::detecting_client(server).await
    } else {
        common::client(server).await
    }
}

/// The party rules, as the README states them: futures run concurrently
/// in one task (`join!`, `join_all`, `FuturesUnordered`) are one party.
/// With detection off (the default) the second and third acquires of a
/// lock the first holds for 50 ms wait and acquire; with it on, they are
/// refused as a self-cycle at once (the README's "one task is one party").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_in_one_task_wait_unless_detection_is_on() {
    let server = common::server();
    for on in [false, true] {
        let client = client_detecting(&server, on).await;
        let outcomes = tokio::spawn(async move {
            let each = (0..3).map(|_| {
                let client = client.clone();
                async move {
                    let guard = client
                        .lock("dl-red:join")
                        .acquire_within(Some(LONG))
                        .await?;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    guard.release().await
                }
            });
            futures_util::future::join_all(each).await
        })
        .await
        .unwrap();
        let seen: Vec<String> = outcomes.iter().map(said).collect();
        eprintln!("three concurrent acquires in one task, detection {on}: {seen:?}");
        if on {
            assert!(outcomes.iter().any(Result::is_ok), "{seen:?}");
            assert!(outcomes.iter().any(is_deadlock), "{seen:?}");
            assert!(
                outcomes.iter().all(|o| o.is_ok() || is_deadlock(o)),
                "{seen:?}"
            );
        } else {
            assert!(outcomes.iter().all(Result::is_ok), "{seen:?}");
        }
    }
}

/// The party rules: a guard handed to another task still counts for the
/// task that acquired it. A dispatcher that takes a lock and hands the
/// guard to a worker (which works 100 ms) waits for the worker's release
/// at its next acquire with detection off (the default); with it on, that
/// acquire is refused as a self-cycle, as the README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_handed_to_a_worker_is_waited_for_unless_detection_is_on() {
    let server = common::server();
    for on in [false, true] {
        let client = client_detecting(&server, on).await;
        let outcomes = tokio::spawn(async move {
            let lock = client.lock("dl-red:dispatch");
            let mut outcomes = Vec::new();
            for _ in 0..3 {
                match lock.acquire_within(Some(LONG)).await {
                    Ok(guard) => {
                        outcomes.push(Ok(()));
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            drop(guard);
                        });
                    }
                    Err(error) => outcomes.push(Err(error)),
                }
            }
            outcomes
        })
        .await
        .unwrap();
        let seen: Vec<String> = outcomes.iter().map(said).collect();
        eprintln!("dispatcher, detection {on}: {seen:?}");
        if on {
            assert!(outcomes[0].is_ok(), "{seen:?}");
            assert!(is_deadlock(&outcomes[1]), "{seen:?}");
        } else {
            assert!(outcomes.iter().all(Result::is_ok), "{seen:?}");
        }
        // The last worker's release, before the next round.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The party rules: one owner name is one party, across clients. Two
/// clients (two processes of one service) acquiring as the same named
/// owner: one holds for 200 ms and waits for nothing. With detection off
/// (the default) the other waits and acquires; with it on, it is refused
/// at once as a self-cycle, as the README says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_with_one_named_owner_wait_unless_detection_is_on() {
    let server = common::server();
    for on in [false, true] {
        let (c1, c2) = (
            client_detecting(&server, on).await,
            client_detecting(&server, on).await,
        );
        let held = c1
            .lock("dl-red:same-name")
            .with_owner("svc")
            .acquire()
            .await
            .unwrap();
        let releaser = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(held);
        });
        let began = Instant::now();
        let second = c2
            .lock("dl-red:same-name")
            .with_owner("svc")
            .acquire_within(Some(LONG))
            .await;
        eprintln!(
            "same name, other client, detection {on}: {} after {:?}",
            said(&second),
            began.elapsed()
        );
        if on {
            assert!(is_deadlock(&second), "{}", said(&second));
        } else {
            assert!(second.is_ok(), "{}", said(&second));
        }
        if let Ok(guard) = second {
            guard.release().await.unwrap();
        }
        releaser.await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A named owner re-enters a lock it holds from another task of its
/// client (one owner field): no wait, no check, no refusal; a waiter of
/// another name behind it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_owner_re_enters_without_a_deadlock() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (c1, c2) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let held = c1
        .lock("dl-red:reenter")
        .with_owner("x")
        .acquire()
        .await
        .unwrap();
    let other = c1.clone();
    let again = tokio::spawn(async move {
        other
            .lock("dl-red:reenter")
            .with_owner("x")
            .acquire_within(Some(LONG))
            .await
    })
    .await
    .unwrap()
    .expect("the named owner re-enters");
    assert!(edges(&mut admin).await.is_empty(), "a re-entry waited");
    let waiter = tokio::spawn(async move {
        c2.lock("dl-red:reenter")
            .with_owner("y")
            .acquire_within(Some(LONG))
            .await
    });
    until_edges(&admin, 1).await;
    drop((again, held));
    drop(waiter.await.unwrap().expect("y waits, then acquires"));
}

/// A process killed while it waits leaves its wait-for edge
/// [`MAX_EDGE_LIFE`](redlatch::deadlock::MAX_EDGE_LIFE) at most, however
/// long the lease it waited for: alive, a waiter rewrites its edge before
/// it lapses (its PTTL never above the bound). Here `x` waits for B's
/// lock (a 30 s lease), then dies (its wait frozen, never dropped: nothing
/// deletes its edge). Once the edge has lapsed, a fresh process of `x`
/// takes `L1` and works 300 ms, waiting for nothing; B, waiting for `L1`,
/// waits and acquires (the dead edge used to live 31 s and refuse B).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_named_waiters_edge_refuses_nobody_later() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (x, x2, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let bound = redlatch::deadlock::MAX_EDGE_LIFE;
    let held_b = b
        .lock("dl-red:killed:2")
        .with_lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let key = redlatch::deadlock::wait_key("", "n:x", None);
    let lock_x = x.lock("dl-red:killed:2").with_owner("x");
    let mut waiting = Box::pin(lock_x.acquire_within(Some(LONG)));
    let watched = async {
        until_edges(&admin, 1).await;
        let began = Instant::now();
        while began.elapsed() < bound + Duration::from_millis(500) {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut admin)
                .await
                .unwrap();
            assert!(
                pttl > 0 && u128::try_from(pttl).unwrap() <= bound.as_millis(),
                "the live waiter's edge has a PTTL of {pttl} ms (bound {bound:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        outcome = &mut waiting => panic!("x stopped waiting: {}", said(&outcome)),
        () = watched => {}
    }
    // Killed: the wait frozen, never dropped (a drop deletes the edge).
    std::mem::forget(waiting);
    assert!(
        until_no_edge(&admin, bound + Duration::from_secs(1)).await,
        "the dead waiter's edge outlived {bound:?}"
    );
    let held_x = x2
        .lock("dl-red:killed:1")
        .with_owner("x")
        .acquire()
        .await
        .unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held_x);
    });
    let waited = b.lock("dl-red:killed:1").acquire_within(Some(LONG)).await;
    eprintln!("after a dead named waiter: {}", said(&waited));
    assert!(waited.is_ok(), "{}", said(&waited));
    drop(held_b);
}

/// A process killed while it holds `L1` (on a fixed lease: nothing renews
/// it once dead) and waits for `L2`, which B holds for 30 s: its edge
/// lapses within [`MAX_EDGE_LIFE`](redlatch::deadlock::MAX_EDGE_LIFE);
/// from then on B, holding `L2` and waiting for `L1`, is no deadlock: it
/// waits for the dead hold's lease to end and acquires (the dead edge
/// used to live 31 s and refuse B).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_waiters_hold_and_edge_refuse_nobody() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (d, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let bound = redlatch::deadlock::MAX_EDGE_LIFE;
    let held_b = b
        .lock("dl-red:dead:2")
        .with_lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let held_d = d
        .lock("dl-red:dead:1")
        .with_lease(bound + Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    let lock_d = d.lock("dl-red:dead:2");
    let mut waiting = Box::pin(lock_d.acquire_within(Some(LONG)));
    tokio::select! {
        outcome = &mut waiting => panic!("d stopped waiting: {}", said(&outcome)),
        () = until_edges(&admin, 1) => {}
    }
    // Killed: neither its wait nor its hold is ever dropped.
    std::mem::forget(waiting);
    std::mem::forget(held_d);
    assert!(
        until_no_edge(&admin, bound + Duration::from_secs(1)).await,
        "the dead waiter's edge outlived {bound:?}"
    );
    let began = Instant::now();
    let waited = b.lock("dl-red:dead:1").acquire_within(Some(LONG)).await;
    eprintln!(
        "behind a dead holder and waiter: {} after {:?}",
        said(&waited),
        began.elapsed()
    );
    assert!(waited.is_ok(), "{}", said(&waited));
    drop(held_b);
}

/// Wait-for edges pointing anywhere (a missing key, a list, a set, a
/// string that is not an owner) and the waiter's own edge key of another
/// type: nobody is refused, and the waiter acquires once the holder lets
/// go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edges_pointing_anywhere_refuse_nobody_and_break_no_acquire() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (c1, c2) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let _: () = redis::pipe()
        .cmd("RPUSH")
        .arg("dl-red:bad:list")
        .arg("n:w")
        .ignore()
        .cmd("SADD")
        .arg("dl-red:bad:set")
        .arg("n:w")
        .ignore()
        .cmd("SET")
        .arg("dl-red:bad:string")
        .arg("garbage")
        .ignore()
        // The waiter's own edge key, a hash.
        .cmd("HSET")
        .arg(redlatch::deadlock::wait_key("", "n:w", None))
        .arg("f")
        .arg("v")
        .ignore()
        .query_async(&mut admin)
        .await
        .unwrap();
    for target in [
        "dl-red:bad:missing",
        "dl-red:bad:list",
        "dl-red:bad:set",
        "dl-red:bad:string",
        "dl-red:bad:lock",
    ] {
        let _: () = redis::cmd("SET")
            .arg(redlatch::deadlock::wait_key("", "n:q", None))
            .arg(target)
            .arg("PX")
            .arg(30_000)
            .query_async(&mut admin)
            .await
            .unwrap();
        let held = c1
            .lock("dl-red:bad:lock")
            .with_owner("q")
            .acquire()
            .await
            .unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(held);
        });
        let waited = c2
            .lock("dl-red:bad:lock")
            .with_owner("w")
            .acquire_within(Some(LONG))
            .await;
        assert!(waited.is_ok(), "q's edge to {target}: {}", said(&waited));
    }
}

/// A thousand waiters on one lock, over eight clients, each holding it
/// for a moment: no deadlock, all acquire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_on_one_lock_see_no_deadlock() {
    let server = common::server();
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(common::detecting_client(&server).await);
    }
    let holder = clients[0].lock("dl-red:crowd").acquire().await.unwrap();
    let started = Instant::now();
    let tasks: Vec<_> = (0..1_000)
        .map(|i| {
            let client = clients[i % 8].clone();
            tokio::spawn(async move {
                let guard = client
                    .lock("dl-red:crowd")
                    .acquire_within(Some(Duration::from_secs(30)))
                    .await?;
                guard.release().await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(holder);
    let mut failed = Vec::new();
    for task in tasks {
        if let Err(error) = task.await.unwrap() {
            failed.push(error.to_string());
        }
    }
    eprintln!("1,000 waiters on one lock in {:?}", started.elapsed());
    assert!(
        failed.is_empty(),
        "{} failed, e.g. {:?}",
        failed.len(),
        failed.first()
    );
}

/// A chain of 20 locks, each party holding one and waiting for the next,
/// longer than the 16-lock bound, with no cycle: nobody is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_longer_than_the_depth_bound_is_no_deadlock() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let clients = [
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    ];
    let n = 20;
    let (last_held, last) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
    // Every party holds its lock before any waits for the next.
    let all_hold = Arc::new(Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let client = clients[i % 2].clone();
        let (held, release, all_hold) = (last_held.clone(), last.clone(), all_hold.clone());
        tasks.push(tokio::spawn(async move {
            let first = client
                .lock(format!("dl-red:chain:{i}"))
                .acquire()
                .await
                .map_err(|e| e.to_string())?;
            held.add_permits(1);
            all_hold.wait().await;
            if i == n - 1 {
                let _ = release.acquire().await.unwrap();
                return Ok(());
            }
            let next = client
                .lock(format!("dl-red:chain:{}", i + 1))
                .acquire_within(Some(LONG))
                .await
                .map_err(|e| format!("party {i}: {e}"))?;
            drop((next, first));
            Ok::<(), String>(())
        }));
    }
    let _ = last_held.acquire_many(n as u32).await.unwrap();
    until_edges(&admin, n - 1).await;
    last.add_permits(1);
    for task in tasks {
        if let Err(error) = task.await.unwrap() {
            panic!("a chain without a cycle: {error}");
        }
    }
    assert!(until_no_edge(&admin, LONG).await);
    drop(edges(&mut admin).await);
}

// ---------------------------------------------------------------------
// Missed deadlocks: real cycles.
// ---------------------------------------------------------------------

/// Three parties on three clients, each holding one lock and waiting for
/// the next (plain names in one round, hash-tagged names in another),
/// waits begun in a random order: exactly one is refused, soon after its
/// wait began, naming three locks; the other two proceed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_party_cycle_is_refused_to_exactly_one_party() {
    let server = common::server();
    let clients = [
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    ];
    let mut rng = common::Rng::from_env();
    for round in 0..6 {
        let names: Vec<String> = (0..3)
            .map(|i| match round % 2 {
                0 => format!("dl-red:three:{round}:{i}"),
                _ => format!("{{dl-red}}:three:{round}:{i}"),
            })
            .collect();
        let barrier = Arc::new(Barrier::new(3));
        let tasks: Vec<_> = (0..3)
            .map(|i| {
                let client = clients[i].clone();
                let (first, second) = (names[i].clone(), names[(i + 1) % 3].clone());
                let barrier = barrier.clone();
                let pause = Duration::from_millis(rng.below(30));
                tokio::spawn(async move {
                    let held = client.lock(first).acquire().await.unwrap();
                    barrier.wait().await;
                    tokio::time::sleep(pause).await;
                    let began = Instant::now();
                    let outcome = client.lock(second).acquire_within(Some(LONG)).await;
                    let took = began.elapsed();
                    // The refused one lets go at once; the others after their second.
                    let cycle = match &outcome {
                        Err(Error::Deadlock { cycle }) => Some(cycle.len()),
                        _ => None,
                    };
                    let ok = outcome.is_ok();
                    drop((outcome, held));
                    (ok, cycle, took)
                })
            })
            .collect();
        let mut refused = Vec::new();
        let mut acquired = 0;
        for task in tasks {
            let (ok, cycle, took) = tokio::time::timeout(LONG * 2, task)
                .await
                .expect("a party of the cycle hangs")
                .unwrap();
            if let Some(len) = cycle {
                refused.push((len, took));
            }
            acquired += usize::from(ok);
        }
        eprintln!("round {round}: refused {refused:?}, {acquired} acquired");
        assert_eq!(refused.len(), 1, "round {round}: {refused:?}");
        assert_eq!(refused[0].0, 3, "round {round}");
        assert_eq!(acquired, 2, "round {round}");
    }
}

/// The first waiter of a cycle parks for a long time (its holder's lease
/// is 30 s, watchdog-renewed: it retries in ~30 s) and the cycle closes
/// two seconds later, past the edge's margin: its edge still stands and
/// the closer is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_closed_while_the_first_waiter_parks_for_a_long_lease_is_found() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let (b_holds, held) = oneshot::channel();
    let (go, closing) = oneshot::channel::<()>();
    let closer = tokio::spawn(async move {
        let first = b.lock("dl-red:parked:2").acquire().await.unwrap();
        b_holds.send(()).unwrap();
        closing.await.unwrap();
        let began = Instant::now();
        let outcome = b
            .lock("dl-red:parked:1")
            .acquire_within(Some(LONG))
            .await
            .map(drop);
        (outcome, began.elapsed(), first)
    });
    held.await.unwrap();
    let waiter = tokio::spawn(async move {
        let first = a.lock("dl-red:parked:1").acquire().await.unwrap();
        let outcome = a.lock("dl-red:parked:2").acquire_within(Some(LONG)).await;
        (outcome, first)
    });
    until_edges(&admin, 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let left = edges(&mut admin).await;
    assert_eq!(left.len(), 1, "the parked waiter's edge lapsed: {left:?}");
    go.send(()).unwrap();
    let (outcome, took, first) = closer.await.unwrap();
    eprintln!(
        "closed 2 s into a long park: {} after {took:?}",
        outcome_unit(&outcome)
    );
    assert!(is_deadlock(&outcome), "{}", outcome_unit(&outcome));
    assert!(took <= SOON, "{took:?}");
    drop(first);
    let (outcome, _first) = tokio::time::timeout(LONG, waiter).await.unwrap().unwrap();
    drop(outcome.expect("the parked waiter proceeds"));
}

fn outcome_unit(outcome: &Result<(), Error>) -> String {
    said(outcome)
}

/// A ring of 16 locks (the depth bound), 16 parties on two clients: the
/// closer is refused naming all 16, the others proceed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_of_sixteen_locks_is_found() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let clients = [
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    ];
    let n = 16;
    let holding = Arc::new(Semaphore::new(0));
    let mut gos = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..n {
        let client = clients[i % 2].clone();
        let holding = holding.clone();
        let (go, started) = oneshot::channel::<()>();
        gos.push(go);
        tasks.push(tokio::spawn(async move {
            let first = client
                .lock(format!("dl-red:ring:{i}"))
                .acquire()
                .await
                .unwrap();
            holding.add_permits(1);
            started.await.unwrap();
            let outcome = client
                .lock(format!("dl-red:ring:{}", (i + 1) % n))
                .acquire_within(Some(LONG))
                .await;
            let cycle = match &outcome {
                Err(Error::Deadlock { cycle }) => Some(cycle.len()),
                _ => None,
            };
            let ok = outcome.is_ok();
            drop((outcome, first));
            (ok, cycle)
        }));
    }
    let _ = holding.acquire_many(n as u32).await.unwrap();
    // Each begins its wait once the ones before it wrote their edges.
    for (i, go) in gos.into_iter().enumerate() {
        go.send(()).unwrap();
        if i + 1 < n {
            until_edges(&admin, i + 1).await;
        }
    }
    let mut refused = Vec::new();
    let mut acquired = 0;
    for task in tasks {
        let (ok, cycle) = tokio::time::timeout(LONG * 2, task)
            .await
            .expect("a party of the ring hangs")
            .unwrap();
        refused.extend(cycle);
        acquired += usize::from(ok);
    }
    assert_eq!(refused, vec![n], "refused: {refused:?}");
    assert_eq!(acquired, n - 1);
}

/// A waiter that queues behind a waiter of its own client for the same
/// lock parks without an attempt (`Lock::queue_up`): it checks and writes
/// its edge before it parks (it used to run no check until its park
/// ended, the holder's lease). Here T2 holds `L1` and queues for `L2`
/// behind T1; T3 holds `L2` and waits for `L1`: a real cycle T2 → L2 → T3
/// → L1 → T2. One of T2 and T3 is refused at once (both waits used to
/// run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_a_waiter_queued_in_its_client_is_found() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (c1, c2) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let wait = Some(Duration::from_secs(3));
    let (t3_holds, held) = oneshot::channel();
    let (go, closing) = oneshot::channel::<()>();
    let t3 = tokio::spawn(async move {
        let first = c2.lock("dl-red:queued:2").acquire().await.unwrap();
        t3_holds.send(()).unwrap();
        closing.await.unwrap();
        let outcome = c2
            .lock("dl-red:queued:1")
            .acquire_within(wait)
            .await
            .map(drop);
        drop(first);
        outcome
    });
    held.await.unwrap();
    let t1_client = c1.clone();
    let t1 = tokio::spawn(async move {
        t1_client
            .lock("dl-red:queued:2")
            .acquire_within(Some(LONG))
            .await
            .map(drop)
    });
    until_edges(&admin, 1).await;
    let (t2_holds, held) = oneshot::channel();
    let t2 = tokio::spawn(async move {
        let first = c1.lock("dl-red:queued:1").acquire().await.unwrap();
        t2_holds.send(()).unwrap();
        let outcome = c1
            .lock("dl-red:queued:2")
            .acquire_within(wait)
            .await
            .map(drop);
        drop(first);
        outcome
    });
    held.await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    eprintln!("edges with T2 queued: {:?}", edges(&mut admin).await);
    go.send(()).unwrap();
    let (t2, t3) = (t2.await.unwrap(), t3.await.unwrap());
    eprintln!("T2: {}; T3: {}", said(&t2), said(&t3));
    t1.abort();
    assert!(
        is_deadlock(&t2) || is_deadlock(&t3),
        "T2: {}; T3: {}",
        said(&t2),
        said(&t3)
    );
}

/// The same case as a cycle of one: a task holding a lock asks for it
/// again while another task of its client waits for it. It queues behind
/// that waiter and is refused at once, as
/// `a_task_acquiring_its_own_lock_again_is_refused` is without the other
/// waiter (it used to park with no check and wait its 2 s out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_cycle_behind_a_queued_waiter_is_refused_at_once() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let client = common::detecting_client(&server).await;
    let (holds, held) = oneshot::channel();
    let (go, again) = oneshot::channel::<()>();
    let me = {
        let client = client.clone();
        tokio::spawn(async move {
            let lock = client.lock("dl-red:self-queued");
            let first = lock.acquire().await.unwrap();
            holds.send(()).unwrap();
            again.await.unwrap();
            let began = Instant::now();
            let outcome = lock
                .acquire_within(Some(Duration::from_secs(2)))
                .await
                .map(drop);
            drop(first);
            (outcome, began.elapsed())
        })
    };
    held.await.unwrap();
    let other = tokio::spawn(async move {
        client
            .lock("dl-red:self-queued")
            .acquire_within(Some(LONG))
            .await
            .map(drop)
    });
    until_edges(&admin, 1).await;
    go.send(()).unwrap();
    let (outcome, took) = me.await.unwrap();
    eprintln!(
        "self-cycle behind a queued waiter: {} after {took:?}",
        outcome_unit(&outcome)
    );
    drop(other.await.unwrap());
    assert!(is_deadlock(&outcome), "{}", outcome_unit(&outcome));
    assert!(took <= SOON, "{took:?}");
}

/// A two-party cycle hidden behind 300 idle readers: the writer's walk
/// bounds its work (steps), not its parties: an idle reader costs one
/// step (it used to count against a bound of 256 visited parties, and the
/// walk stopped before the one reader that waits for the writer's lock). (The hash keeps its insertion order
/// here, `hash-max-listpack-entries` raised, so that the reader in the
/// cycle is looked at last every time; with the default a hash of 300
/// fields is in hash order, and the cycle is missed about one time in
/// seven.) The writer is refused (it used to wait its 3 s out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_party_cycle_behind_many_readers_is_found() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hash-max-listpack-entries")
        .arg(4096)
        .query_async(&mut admin)
        .await
        .unwrap();
    let (c1, c2, c3) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let (reading, release) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
    let readers: Vec<_> = (0..300)
        .map(|_| {
            let (client, reading, release) = (c1.clone(), reading.clone(), release.clone());
            tokio::spawn(async move {
                let read = client
                    .read_write_lock("dl-red:crowd-rw")
                    .read()
                    .await
                    .unwrap();
                reading.add_permits(1);
                let _ = release.acquire().await;
                drop(read);
            })
        })
        .collect();
    let _ = reading.acquire_many(300).await.unwrap();
    let (b, a) = writer_closes_a_cycle_through_a_reader(
        c2,
        c3,
        ("dl-red:crowd-l1", "dl-red:crowd-rw"),
        Duration::from_secs(3),
        &admin,
        1,
    )
    .await;
    eprintln!(
        "writer behind 301 readers, one in a cycle: {}",
        outcome_unit(&b)
    );
    release.close();
    for reader in readers {
        reader.await.unwrap();
    }
    let _ = tokio::time::timeout(LONG, a).await;
    assert!(is_deadlock(&b), "{}", outcome_unit(&b));
}

/// A wait-for key of another type (a hash at `redlatch_wait:n:z`, left
/// by anything) belonging to a bystander the walk passes (a reader of the
/// read-write lock in the cycle) reads as no edge, and the real cycle A →
/// L1 → B → RW → A is found: the writer is refused (the key used to fail
/// the check, WRONGTYPE on its GET, and the writer waited its 2 s out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_typed_edge_of_a_bystander_does_not_hide_a_cycle() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let _: () = redis::cmd("HSET")
        .arg(redlatch::deadlock::wait_key("", "n:z", None))
        .arg("f")
        .arg("v")
        .query_async(&mut admin)
        .await
        .unwrap();
    let (c1, c2, c3) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let z = c1
        .read_write_lock("dl-red:poison-rw")
        .with_owner("z")
        .read()
        .await
        .unwrap();
    // The foreign key and A's edge.
    let (b, a) = writer_closes_a_cycle_through_a_reader(
        c2,
        c3,
        ("dl-red:poison-l1", "dl-red:poison-rw"),
        Duration::from_secs(2),
        &admin,
        2,
    )
    .await;
    eprintln!("cycle past a foreign-typed edge: {}", outcome_unit(&b));
    drop(z);
    let _ = tokio::time::timeout(LONG, a).await;
    assert!(is_deadlock(&b), "{}", outcome_unit(&b));
}

// ---------------------------------------------------------------------
// The check's errors and the server's settings.
// ---------------------------------------------------------------------

/// A user whose ACL lets it write the locks but not the wait-for keys:
/// its check fails (NOPERM), which costs the detection only; the waiter
/// waits and acquires as without detection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_key_the_acl_forbids_costs_the_detection_not_the_acquire() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "locker",
            "on",
            ">pw",
            "resetkeys",
            // Every key but the wait-for edges, which it may only read.
            "~dl-red:*",
            "~redlatch_[a-v]*",
            "~redlatch_[x-z]*",
            "~redisson*",
            "%R~redlatch_wait:*",
            "resetchannels",
            "&*",
            "+@all",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://locker:pw@127.0.0.1:{}", server.port());
    let limited = common::detecting_client_at(&url, redlatch::Settings::DEFAULT_LEASE).await;
    let holder = common::detecting_client(&server).await;
    for _ in 0..3 {
        let held = holder.lock("dl-red:acl").acquire().await.unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(held);
        });
        let waited = limited.lock("dl-red:acl").acquire_within(Some(LONG)).await;
        assert!(waited.is_ok(), "{}", said(&waited));
        drop(waited);
    }
    assert!(edges(&mut admin).await.is_empty());
    // The checks ran, and were refused their edge.
    let log: redis::Value = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(
        format!("{log:?}").contains(redlatch::deadlock::WAIT_KEY_PREFIX),
        "no check was refused: {log:?}"
    );
}

// ---------------------------------------------------------------------
// Exit paths.
// ---------------------------------------------------------------------

/// A single try (`try_acquire`) never waits, so it can close no cycle:
/// for a lock its own task holds, or whose holder waits for it, it
/// answers "not now" (`Ok(None)`), never `Error::Deadlock` (which a
/// caller's `?` would turn into a failure of the very tool used to avoid
/// deadlocks: try, back off), and leaves no edge. (Failed before dl-core's
/// f0ea931: both tries were refused as deadlocks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_try_is_never_refused_as_a_deadlock() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (c1, c2) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let (own, crossed) = tokio::spawn(async move {
        let lock = c1.lock("dl-red:try:1");
        let held = lock.acquire().await.unwrap();
        let own = lock.try_acquire().await.map(|guard| guard.is_some());
        // U holds L2 and waits for L1 (ours); a try of L2 is no wait.
        let (u_holds, holding) = oneshot::channel();
        let u = tokio::spawn(async move {
            let l2 = c2.lock("dl-red:try:2").acquire().await.unwrap();
            u_holds.send(()).unwrap();
            let outcome = c2.lock("dl-red:try:1").acquire_within(Some(LONG)).await;
            drop((outcome, l2));
        });
        holding.await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let crossed = c1
            .lock("dl-red:try:2")
            .try_acquire()
            .await
            .map(|guard| guard.is_some());
        drop(held);
        u.await.unwrap();
        (own, crossed)
    })
    .await
    .unwrap();
    eprintln!("try of its own lock: {own:?}; try against a waiter: {crossed:?}");
    assert!(until_no_edge(&admin, LONG).await);
    drop(edges(&mut admin).await);
    assert!(matches!(own, Ok(false)), "{own:?}");
    assert!(matches!(crossed, Ok(false)), "{crossed:?}");
}

/// Acquires cancelled at random points (before, during and after the
/// check, which runs right after the busy attempt) and bounded waits that
/// run out: no wait-for edge is left, no background task stays, and the
/// lock is free to take after its holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_waits_leave_no_edge_and_no_task() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (c1, c2) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let held = c1.lock("dl-red:cancel").acquire().await.unwrap();
    let mut rng = common::Rng::from_env();
    for i in 0..150 {
        let client = c2.clone();
        let cut = Duration::from_micros(rng.below(4_000));
        let timed_out = i % 3 == 0;
        tokio::spawn(async move {
            let lock = client.lock("dl-red:cancel");
            if timed_out {
                let outcome = lock.acquire_within(Some(cut)).await;
                assert!(!is_deadlock(&outcome), "{}", said(&outcome));
            } else {
                let _ = tokio::time::timeout(cut, lock.acquire()).await;
            }
        })
        .await
        .unwrap();
    }
    // One left parked, aborted from outside.
    let client = c2.clone();
    let parked =
        tokio::spawn(async move { client.lock("dl-red:cancel").acquire().await.map(drop) });
    until_edges(&admin, 1).await;
    parked.abort();
    assert!(
        until_no_edge(&admin, Duration::from_secs(3)).await,
        "a cancelled wait left its edge"
    );
    let quiet = common::eventually(Duration::from_secs(3), || {
        let c2 = c2.clone();
        async move { c2.background_tasks() == 0 }
    })
    .await;
    assert!(quiet, "{} background tasks stay", c2.background_tasks());
    drop(held);
    drop(
        c2.lock("dl-red:cancel")
            .acquire_within(Some(LONG))
            .await
            .expect("the lock is free"),
    );
}

/// A client dropped while one of its tasks waits (the task aborted, every
/// handle gone): its edge is deleted, or at most lives out its PX (the
/// holder's lease and a second), never longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_while_waiting_leaves_no_edge_past_its_expiry() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let holder = common::detecting_client(&server).await;
    let held = holder.lock("dl-red:dropped").acquire().await.unwrap();
    let waiter_client = common::detecting_client(&server).await;
    let waiting = tokio::spawn(async move {
        waiter_client
            .lock("dl-red:dropped")
            .acquire()
            .await
            .map(drop)
    });
    until_edges(&admin, 1).await;
    waiting.abort();
    let _ = waiting.await;
    let gone = until_no_edge(&admin, Duration::from_secs(2)).await;
    if !gone {
        for key in edges(&mut admin).await {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut admin)
                .await
                .unwrap();
            eprintln!("left: {key}, PTTL {pttl} ms");
            assert!(
                (0..=31_000).contains(&pttl),
                "{key} lives {pttl} ms, past the lease and margin"
            );
        }
    }
    drop(held);
}

/// A server full (`maxmemory`, `noeviction`) while a cycle closes: the
/// check's write may be refused (then the detection of that round is
/// lost), but no acquire fails for it: the closer is refused or its wait
/// runs out, never an out-of-memory error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_costs_the_detection_at_most_never_the_acquire() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let (a_holds, a_held) = oneshot::channel();
    let (b_holds, b_held) = oneshot::channel();
    let (a_go, a_waits) = oneshot::channel::<()>();
    let (b_go, b_waits) = oneshot::channel::<()>();
    let one = tokio::spawn(async move {
        let first = a.lock("dl-red:oom:1").acquire().await.unwrap();
        a_holds.send(()).unwrap();
        a_waits.await.unwrap();
        let outcome = a
            .lock("dl-red:oom:2")
            .acquire_within(Some(Duration::from_secs(2)))
            .await
            .map(drop);
        drop(first);
        outcome
    });
    let two = tokio::spawn(async move {
        let first = b.lock("dl-red:oom:2").acquire().await.unwrap();
        b_holds.send(()).unwrap();
        b_waits.await.unwrap();
        let outcome = b
            .lock("dl-red:oom:1")
            .acquire_within(Some(Duration::from_secs(2)))
            .await
            .map(drop);
        drop(first);
        outcome
    });
    a_held.await.unwrap();
    b_held.await.unwrap();
    // Fill the server.
    let used: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut admin)
        .await
        .unwrap();
    let used: u64 = used
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _: () = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .ignore()
        .cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 2_000_000)
        .ignore()
        .query_async(&mut admin)
        .await
        .unwrap();
    let filler = "x".repeat(10_000);
    let mut full = false;
    for i in 0..1_000 {
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("dl-red:filler:{i}"))
            .arg(&filler)
            .query_async(&mut admin)
            .await;
        if set.is_err() {
            full = true;
            break;
        }
    }
    assert!(full, "the server never filled");
    a_go.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    b_go.send(()).unwrap();
    let (one, two) = (one.await.unwrap(), two.await.unwrap());
    eprintln!("full server: A {}; B {}", said(&one), said(&two));
    for outcome in [&one, &two] {
        let text = said(outcome);
        assert!(
            !text.contains("OOM"),
            "an acquire failed for the full server: {text}"
        );
    }
    assert!(
        is_deadlock(&two) || matches!(two, Err(Error::Timeout { .. })),
        "{}",
        said(&two)
    );
}

/// What the detection costs a contended lock: 8 tasks on 2 clients take
/// one lock 400 times in all, with detection on and off (each contended
/// acquire runs a check per busy attempt and deletes its edge before it
/// returns). Printed; the bound only catches a collapse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_handoffs_with_and_without_detection() {
    let server = common::server();
    let mut took = Vec::new();
    for detect in [false, true] {
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(
                redlatch::Client::builder(&server.url())
                    .deadlock_detection(detect)
                    .connect()
                    .await
                    .unwrap(),
            );
        }
        let before =
            crate::support::info_counter(&server, "stats", "total_commands_processed").await;
        let started = Instant::now();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let client = clients[i % 2].clone();
                let name = format!("dl-red:cost:{detect}");
                tokio::spawn(async move {
                    for _ in 0..50 {
                        let guard = client
                            .lock(name.as_str())
                            .acquire_within(Some(LONG))
                            .await
                            .unwrap();
                        guard.release().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed();
        let commands = crate::support::info_counter(&server, "stats", "total_commands_processed")
            .await
            - before;
        eprintln!("detection {detect}: 400 contended acquires in {elapsed:?}, {commands} commands");
        took.push(elapsed);
    }
    assert!(took[1] <= took[0] * 5 + Duration::from_secs(1), "{took:?}");
}

/// The longest run of the deadlock check the server logged (SLOWLOG,
/// everything over 1 ms), in µs.
async fn longest_check(admin: &mut redis::aio::MultiplexedConnection) -> i64 {
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1_000)
        .query_async(admin)
        .await
        .unwrap();
    log.iter()
        .filter_map(|entry| {
            let redis::Value::Array(fields) = entry else {
                return None;
            };
            let text = format!("{:?}", fields.get(3)?);
            let micros = match fields.get(2)? {
                redis::Value::Int(micros) => *micros,
                _ => return None,
            };
            text.contains(redlatch::deadlock::WAIT_KEY_PREFIX)
                .then_some(micros)
        })
        .max()
        .unwrap_or(0)
}

/// The walk bounds its work (2,000 steps: holder fields examined, edges
/// read), and reads each lock's holders once: here 300 readers of one
/// read-write lock wait to write a second one read by 300 others; a
/// writer of the first runs checks that stay short (a few ms). The walk
/// used to bound the parties it visited (256), not the work per visit
/// (256 × 300 holders read and copied, 0.5 s in one script, every client
/// of the server waiting behind it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_over_a_huge_graph_stays_short() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let (c1, c2, c3) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let n = 300;
    let (reading, release) = (Arc::new(Semaphore::new(0)), Arc::new(Semaphore::new(0)));
    let mut tasks = Vec::new();
    // 300 idle readers of BIG2.
    for _ in 0..n {
        let (client, reading, release) = (c1.clone(), reading.clone(), release.clone());
        tasks.push(tokio::spawn(async move {
            let read = client.read_write_lock("dl-red:big2").read().await.unwrap();
            reading.add_permits(1);
            let _ = release.acquire().await;
            drop(read);
        }));
    }
    let _ = reading.acquire_many(n).await.unwrap();
    // 300 readers of BIG, each waiting to write BIG2.
    for _ in 0..n {
        let (client, release) = (c2.clone(), release.clone());
        tasks.push(tokio::spawn(async move {
            let read = client.read_write_lock("dl-red:big").read().await.unwrap();
            let big2 = client.read_write_lock("dl-red:big2");
            let write = tokio::select! {
                write = big2.write_within(Some(LONG)) => write.ok(),
                _ = release.acquire() => None,
            };
            drop((write, read));
        }));
    }
    until_edges(&admin, n as usize).await;
    let _: () = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(1_000)
        .ignore()
        .cmd("SLOWLOG")
        .arg("RESET")
        .ignore()
        .query_async(&mut admin)
        .await
        .unwrap();
    let outcome = c3
        .read_write_lock("dl-red:big")
        .write_within(Some(Duration::from_secs(1)))
        .await
        .map(drop);
    let longest = longest_check(&mut admin).await;
    eprintln!(
        "a writer over {n} readers each waiting on {n} readers: {}; longest check {longest} µs",
        said(&outcome)
    );
    release.close();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(longest <= 50_000, "one check ran {longest} µs");
}

/// What one kind's acquire of a name gives: a hold kept while the value
/// lives, or the error.
type Take = fn(
    redlatch::Client,
    String,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Box<dyn std::any::Any + Send>, Error>> + Send>,
>;

/// Holds on a fixed lease (not renewed by the watchdog), a read hold
/// taken before a write, and a token lock: each a hold of the waiter's own
/// task, so its second acquire waits for itself, a cycle of one, and must
/// be refused (since 509ed4c a closing hold of the waiter's client counts
/// only while the client tracks a guard of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_cycle_through_any_hold_of_the_task_is_refused() {
    const LEASE: Duration = Duration::from_secs(20);
    const WAIT: Option<Duration> = Some(Duration::from_secs(2));
    let kinds: &[(&str, Take, Take)] = &[
        (
            "lock, fixed lease",
            |c, n| {
                Box::pin(
                    async move { Ok(Box::new(c.lock(n).with_lease(LEASE).acquire().await?) as _) },
                )
            },
            |c, n| {
                Box::pin(async move { Ok(Box::new(c.lock(n).acquire_within(WAIT).await?) as _) })
            },
        ),
        (
            "fair lock, fixed lease",
            |c, n| {
                Box::pin(async move {
                    Ok(Box::new(c.fair_lock(n).with_lease(LEASE).acquire().await?) as _)
                })
            },
            |c, n| {
                Box::pin(
                    async move { Ok(Box::new(c.fair_lock(n).acquire_within(WAIT).await?) as _) },
                )
            },
        ),
        (
            "spin lock, fixed lease",
            |c, n| {
                Box::pin(async move {
                    Ok(Box::new(c.spin_lock(n).with_lease(LEASE).acquire().await?) as _)
                })
            },
            |c, n| {
                Box::pin(
                    async move { Ok(Box::new(c.spin_lock(n).acquire_within(WAIT).await?) as _) },
                )
            },
        ),
        (
            "read-write lock writing, fixed lease",
            |c, n| {
                Box::pin(async move {
                    Ok(Box::new(c.read_write_lock(n).with_lease(LEASE).write().await?) as _)
                })
            },
            |c, n| {
                Box::pin(async move {
                    Ok(Box::new(c.read_write_lock(n).write_within(WAIT).await?) as _)
                })
            },
        ),
        (
            "read-write lock, reading then writing",
            |c, n| Box::pin(async move { Ok(Box::new(c.read_write_lock(n).read().await?) as _) }),
            |c, n| {
                Box::pin(async move {
                    Ok(Box::new(c.read_write_lock(n).write_within(WAIT).await?) as _)
                })
            },
        ),
        (
            "token lock",
            |c, n| Box::pin(async move { Ok(Box::new(c.token_lock(n).acquire().await?) as _) }),
            |c, n| {
                Box::pin(
                    async move { Ok(Box::new(c.token_lock(n).acquire_within(WAIT).await?) as _) },
                )
            },
        ),
    ];
    let server = common::server();
    let client = common::detecting_client(&server).await;
    let mut failed = Vec::new();
    let mut runs = Vec::new();
    for (i, (kind, hold, again)) in kinds.iter().enumerate() {
        let (client, name) = (client.clone(), format!("dl-red:self-any:{i}"));
        let (kind, hold, again) = (*kind, *hold, *again);
        runs.push(tokio::spawn(async move {
            let held = hold(client.clone(), name.clone()).await.unwrap();
            let began = Instant::now();
            let outcome = again(client, name).await.map(drop);
            drop(held);
            (kind, outcome, began.elapsed())
        }));
    }
    for run in runs {
        let (kind, outcome, took) = run.await.unwrap();
        eprintln!("{kind}: {} after {took:?}", said(&outcome));
        if !is_deadlock(&outcome) {
            failed.push(format!("{kind}: {}", said(&outcome)));
        }
    }
    assert!(failed.is_empty(), "not refused: {failed:?}");
}

/// Two parties close a two-lock cycle at the same instant (a barrier
/// right before both waits), 40 times: as two tasks of one client and as
/// tasks of two clients. Every time exactly one is refused and the other
/// takes its second lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_closers_refuse_exactly_one_every_time() {
    let server = common::server();
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    for round in 0..40 {
        let clients = if round % 2 == 0 {
            [a.clone(), a.clone()]
        } else {
            [a.clone(), b.clone()]
        };
        let names = [
            format!("dl-red:storm:{round}:1"),
            format!("dl-red:storm:{round}:2"),
        ];
        let barrier = Arc::new(Barrier::new(2));
        let tasks: Vec<_> = (0..2)
            .map(|i| {
                let client = clients[i].clone();
                let (first, second) = (names[i].clone(), names[1 - i].clone());
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let held = client.lock(first).acquire().await.unwrap();
                    barrier.wait().await;
                    let outcome = client.lock(second).acquire_within(Some(LONG)).await;
                    let refused = is_deadlock(&outcome);
                    let ok = outcome.is_ok();
                    drop((outcome, held));
                    (refused, ok)
                })
            })
            .collect();
        let mut refused = 0;
        let mut acquired = 0;
        for task in tasks {
            let (r, ok) = tokio::time::timeout(LONG * 2, task)
                .await
                .expect("a party hangs")
                .unwrap();
            refused += usize::from(r);
            acquired += usize::from(ok);
        }
        assert_eq!((refused, acquired), (1, 1), "round {round}");
    }
}

/// On a Redis Cluster, cycles across hash slots are not looked for, and
/// looking must never fail an acquire (no CROSSSLOT): two cycles, one over
/// an untagged key and a tagged one, one over keys of two different tags
/// (each party's edge in the slot of the lock it waits for), on clients
/// with and without a key prefix. Every wait runs out as without
/// detection; none errs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cycles_across_cluster_slots_are_not_errors() {
    let cluster = testkit::Cluster::start(3, 0).expect("start a 3-master cluster");
    let connect = |prefix: &'static str| {
        let urls = cluster.urls();
        async move {
            redlatch::ClientBuilder::cluster(urls)
                .connect_timeout(Duration::from_secs(2))
                .response_timeout(Duration::from_secs(2))
                .key_prefix(prefix)
                .connect()
                .await
                .expect("connect to the cluster")
        }
    };
    for prefix in ["", "app:"] {
        for (one, two) in [
            ("{dl-red}:mixed", "dl-red-untagged"),
            ("{dl-red-t}:1", "{dl-red-u}:2"),
        ] {
            let (a, b) = (connect(prefix).await, connect(prefix).await);
            let barrier = Arc::new(Barrier::new(2));
            let tasks: Vec<_> = [(a, one, two), (b, two, one)]
                .into_iter()
                .map(|(client, first, second)| {
                    let barrier = barrier.clone();
                    tokio::spawn(async move {
                        let held = client.lock(first).acquire().await.unwrap();
                        barrier.wait().await;
                        let outcome = client
                            .lock(second)
                            .acquire_within(Some(Duration::from_millis(800)))
                            .await
                            .map(drop);
                        drop(held);
                        outcome
                    })
                })
                .collect();
            for task in tasks {
                let outcome = task.await.unwrap();
                assert!(
                    matches!(outcome, Err(Error::Timeout { .. })),
                    "prefix {prefix:?}, {one} / {two}: {}",
                    said(&outcome)
                );
            }
        }
    }
}

/// A wait cancelled from outside (`tokio::time::timeout` around
/// `acquire`) leaves no edge for the party's next command: the edge's
/// `DEL` is queued on the client's connection as the wait drops, before
/// anything the task sends next (it was deleted by a task of its own, so
/// the next command could reach Redis first and see it).
///
/// A (anonymous) holds `L1` and waits for `L2`, held by the named owner
/// `obs`, until its wait is cut off. Right after, without yielding, A's
/// task acquires `L1` as `obs`: queued behind a waiter of its client, that
/// acquire's first command is its deadlock check, which would find
/// `obs → L1 → A → L2 → obs` through A's cut-off wait (a false deadlock).
/// It must wait (here until its own short timeout), not be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_no_edge_for_the_party_right_after() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    for round in 0..3 {
        let (l1, l2) = (
            format!("dl-red:cut:{round}:1"),
            format!("dl-red:cut:{round}:2"),
        );
        let obs = b
            .lock(l2.as_str())
            .with_owner("obs")
            .acquire()
            .await
            .unwrap();
        let (holds, held) = oneshot::channel();
        let (go, going) = oneshot::channel::<()>();
        let (a_task, a_l1, a_l2) = (a.clone(), l1.clone(), l2.clone());
        let party = tokio::spawn(async move {
            let first = a_task.lock(a_l1.as_str()).acquire().await.unwrap();
            holds.send(()).unwrap();
            going.await.unwrap();
            let cut = tokio::time::timeout(
                Duration::from_millis(50),
                a_task.lock(a_l2.as_str()).acquire(),
            )
            .await;
            assert!(cut.is_err(), "A took a held lock");
            // The task's next command, right after the cut-off wait.
            let next = tokio::time::timeout(
                Duration::from_millis(300),
                a_task.lock(a_l1.as_str()).with_owner("obs").acquire(),
            )
            .await;
            drop(first);
            next.map(|outcome| outcome.map(drop))
        });
        held.await.unwrap();
        // A waiter of A's client on `L1`, parked: the next acquire of
        // `L1` in this client queues behind it.
        let waiter = tokio::spawn({
            let lock = a.lock(l1.as_str());
            async move { lock.acquire_within(Some(LONG)).await.map(drop) }
        });
        until_edges(&admin, 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        go.send(()).unwrap();
        let next = party.await.unwrap();
        eprintln!("round {round}: the next acquire {next:?}");
        assert!(
            next.is_err(),
            "round {round}: the next acquire was not left waiting: {next:?}"
        );
        waiter.await.unwrap().unwrap();
        drop(obs);
        assert!(
            until_no_edge(&admin, LONG).await,
            "round {round}: an edge stayed"
        );
    }
}

/// A multi-lock waits through its locks' own waits: a cycle through a
/// multi-lock's wait (A holds M1 and takes {M2, M3}, B holds M3 and waits
/// for M1) is refused to one party; if that is the multi-lock, it gives
/// back what it took; the other proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_a_multi_lock_is_refused_to_one_party() {
    let server = common::server();
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let barrier = Arc::new(Barrier::new(2));
    let (go_a, go_b) = (barrier.clone(), barrier);
    let one = tokio::spawn(async move {
        let held = a.lock("dl-red:multi:1").acquire().await.unwrap();
        go_a.wait().await;
        let both = redlatch::MultiLock::new([a.lock("dl-red:multi:2"), a.lock("dl-red:multi:3")]);
        let outcome = both.acquire_within(Some(LONG)).await.map(drop);
        drop(held);
        outcome
    });
    let two = tokio::spawn(async move {
        let held = b.lock("dl-red:multi:3").acquire().await.unwrap();
        go_b.wait().await;
        let outcome = b
            .lock("dl-red:multi:1")
            .acquire_within(Some(LONG))
            .await
            .map(drop);
        drop(held);
        outcome
    });
    let (one, two) = (
        tokio::time::timeout(LONG * 2, one)
            .await
            .expect("A hangs")
            .unwrap(),
        tokio::time::timeout(LONG * 2, two)
            .await
            .expect("B hangs")
            .unwrap(),
    );
    eprintln!("multi-lock: A {}; B {}", said(&one), said(&two));
    assert_eq!(
        usize::from(is_deadlock(&one)) + usize::from(is_deadlock(&two)),
        1,
        "A {}; B {}",
        said(&one),
        said(&two)
    );
    assert!(one.is_ok() || two.is_ok());
}

// ---------------------------------------------------------------------
// `Client::waits` (and the keyspace walk it shares with `Client::locks`),
// tried as an adversary would: odd prefixes, odd edges, odd servers.
// ---------------------------------------------------------------------

/// `SET key value` with raw bytes (keys and values need not be UTF-8).
async fn set_raw(
    admin: &mut redis::aio::MultiplexedConnection,
    key: impl redis::ToRedisArgs,
    value: impl redis::ToRedisArgs,
) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(admin)
        .await
        .expect("SET");
}

/// `Client::waits` under prefix `app:`, on a server holding the edge
/// `bad_key` → `bad_value` beside a good one (`n:ok` waits for `dl:ok`).
async fn waits_beside_a_good_edge(
    bad_key: impl redis::ToRedisArgs,
    bad_value: impl redis::ToRedisArgs,
) -> redlatch::Result<Vec<redlatch::deadlock::Waiting>> {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "app:").await;
    set_raw(&mut admin, bad_key, bad_value).await;
    set_raw(
        &mut admin,
        redlatch::deadlock::wait_key("app:", "n:ok", None),
        "app:dl:ok",
    )
    .await;
    client.waits().await
}

fn waiting(party: &str, lock: &str) -> redlatch::deadlock::Waiting {
    redlatch::deadlock::Waiting {
        party: party.to_owned(),
        lock: lock.to_owned(),
    }
}

/// Key prefixes that are glob patterns, or prefixes of each other ("a",
/// "ab", "a*", "a?", "[a]", "a\", a hash tag, none): each client lists the
/// edges under its own prefix, and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_keeps_each_key_prefix_to_its_own_edges() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let prefixes = [
        "a", "ab", "a*", "a?", "[a]", "a\\", "{a}:", "a:", "a:b:", "",
    ];
    for (i, prefix) in prefixes.iter().enumerate() {
        let key = redlatch::deadlock::wait_key(prefix, &format!("n:p{i}"), None);
        set_raw(&mut admin, key, format!("{prefix}lock{i}")).await;
    }
    for (i, prefix) in prefixes.iter().enumerate() {
        let client = detecting_under(&server.url(), prefix).await;
        let waits = client.waits().await.expect("waits");
        assert_eq!(
            waits,
            [waiting(&format!("n:p{i}"), &format!("lock{i}"))],
            "prefix {prefix:?}"
        );
    }
}

/// An edge whose value is the key prefix alone names no lock (an empty
/// lock name is invalid): the rustdoc says such a key is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_skips_an_edge_naming_the_prefix_alone() {
    let waits = waits_beside_a_good_edge(
        redlatch::deadlock::wait_key("app:", "n:empty", None),
        "app:",
    )
    .await
    .expect("waits");
    assert_eq!(waits, [waiting("n:ok", "dl:ok")]);
}

/// One edge whose key is not UTF-8 (anyone can write one under the
/// prefix) must not hide every other edge: it is a key of no edge's
/// layout, skipped, as the rustdoc says of those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_survives_an_edge_key_that_is_not_utf8() {
    let waits = waits_beside_a_good_edge(&b"app:redlatch_wait:n:\xff\xfe"[..], "app:dl:bad").await;
    assert!(
        matches!(&waits, Ok(w) if w.contains(&waiting("n:ok", "dl:ok"))),
        "{waits:?}"
    );
}

/// One edge whose value is not UTF-8 names no lock: skipped, not an
/// error that hides every other edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_survives_an_edge_value_that_is_not_utf8() {
    let waits = waits_beside_a_good_edge(
        redlatch::deadlock::wait_key("app:", "n:bad", None),
        &b"app:dl:\xff\xfe"[..],
    )
    .await;
    assert_eq!(waits.ok(), Some(vec![waiting("n:ok", "dl:ok")]));
}

/// The listing shares the walk: one key under the prefix that is not
/// UTF-8 must not fail `Client::locks` for every lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_survives_a_key_that_is_not_utf8() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "app:").await;
    let _held = client.lock("dl:held").acquire().await.unwrap();
    set_raw(&mut admin, &b"app:dl:\xff\xfe"[..], "x").await;
    let locks = client.locks("").await;
    let names: Option<Vec<String>> = locks
        .as_ref()
        .ok()
        .map(|locks| locks.iter().map(|l| l.name.clone()).collect());
    assert_eq!(names, Some(vec!["dl:held".to_owned()]), "{locks:?}");
}

/// Prefixes nest: a client under "app:" lists the locks of one under
/// "app:team:" as "team:<name>". The wait-for edges the inner client
/// writes ("app:team:redlatch_wait:<party>", a string with an expiry)
/// are no locks, and must not be listed as token locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_does_not_list_the_edges_of_a_longer_prefix() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let outer = detecting_under(&server.url(), "app:").await;
    let team = detecting_under(&server.url(), "app:team:").await;
    let held = team.lock("l").acquire().await.unwrap();
    let waiter = {
        let team = team.clone();
        tokio::spawn(async move {
            team.lock("l")
                .with_owner("w")
                .acquire_within(Some(LONG))
                .await
                .map(drop)
        })
    };
    until_edges(&admin, 1).await;
    let names: Vec<String> = outer
        .locks("")
        .await
        .expect("locks")
        .into_iter()
        .map(|status| status.name)
        .collect();
    assert_eq!(team.waits().await.unwrap(), [waiting("n:w", "l")]);
    drop(held);
    waiter
        .await
        .unwrap()
        .expect("the waiter acquires once freed");
    assert_eq!(names, ["team:l"]);
}

/// 10,000 edges among 100,000 other keys: every edge comes back, and the
/// walk ends (each call bounded by the 500 ms response timeout; the whole
/// in well under a minute even on a loaded machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_of_ten_thousand_edges_come_back_whole() {
    let server = testkit::RedisServer::builder()
        .arg("enable-debug-command", "yes")
        .start()
        .expect("start redis-server");
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "app:").await;
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(100_000)
        .arg("app:filler")
        .query_async(&mut admin)
        .await
        .expect("DEBUG POPULATE");
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("SET")
            .arg(redlatch::deadlock::wait_key(
                "app:",
                &format!("n:{i:05}"),
                None,
            ))
            .arg(format!("app:dl:{i}"))
            .arg("PX")
            .arg(600_000)
            .ignore();
    }
    let _: () = pipe.query_async(&mut admin).await.expect("SET the edges");
    let began = Instant::now();
    let waits = tokio::time::timeout(Duration::from_secs(60), client.waits())
        .await
        .expect("Client::waits hangs")
        .expect("Client::waits");
    let took = began.elapsed();
    eprintln!("10,000 edges among 100,000 keys read in {took:?}");
    assert_eq!(waits.len(), 10_000);
    for (i, edge) in waits.iter().enumerate() {
        assert_eq!(*edge, waiting(&format!("n:{i:05}"), &format!("dl:{i}")));
    }
}

/// Edges that vanish (deleted, lapsed) or change type between the SCAN
/// that found them and the GET that reads them are left out: no call
/// fails, and nothing listed is not an edge as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_skips_edges_that_vanish_or_change_type_during_the_walk() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "app:").await;
    const N: u64 = 3000;
    let key = |i: u64| redlatch::deadlock::wait_key("app:", &format!("n:{i}"), None);
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("SET")
            .arg(key(i))
            .arg(format!("app:dl:{i}"))
            .ignore();
    }
    let _: () = pipe.query_async(&mut admin).await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (mut admin, stop) = (admin.clone(), stop.clone());
        tokio::spawn(async move {
            let mut rng = common::Rng::new(7);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for _ in 0..50 {
                    let i = rng.below(N);
                    pipe.cmd("DEL").arg(key(i)).ignore();
                    match rng.below(5) {
                        0 => pipe.cmd("HSET").arg(key(i)).arg("f").arg("v").ignore(),
                        1 => pipe.cmd("RPUSH").arg(key(i)).arg("v").ignore(),
                        2 => pipe
                            .cmd("SET")
                            .arg(key(i))
                            .arg(format!("app:dl:{i}"))
                            .arg("PX")
                            .arg(1 + rng.below(5))
                            .ignore(),
                        3 => pipe
                            .cmd("SET")
                            .arg(key(i))
                            .arg(format!("app:dl:{i}"))
                            .ignore(),
                        _ => &mut pipe,
                    };
                }
                let _: () = pipe.query_async(&mut admin).await.unwrap();
            }
        })
    };
    for round in 0..20 {
        let waits = client.waits().await;
        let waits = waits.unwrap_or_else(|e| panic!("round {round}: {e}"));
        for edge in &waits {
            let i = edge.party.strip_prefix("n:").expect("a party as written");
            assert_eq!(edge.lock, format!("dl:{i}"), "round {round}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.await.unwrap();
}

/// A server whose ACL refuses SCAN, or GET, makes `Client::waits` a
/// typed error (never a panic); one that refuses INFO is walked as it is
/// (the rustdoc of the walk says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_on_a_server_whose_acl_refuses_a_command() {
    let server = testkit::RedisServer::builder()
        .arg("user", "noscan on >pw ~* &* +@all -scan")
        .arg("user", "noget on >pw ~* &* +@all -get")
        .arg("user", "noinfo on >pw ~* &* +@all -info")
        .start()
        .expect("start redis-server");
    let mut admin = common::admin(&server).await;
    set_raw(
        &mut admin,
        redlatch::deadlock::wait_key("", "n:ok", None),
        "dl:ok",
    )
    .await;
    let url = |user: &str| format!("redis://{user}:pw@127.0.0.1:{}", server.port());
    for user in ["noscan", "noget"] {
        let client = detecting_under(&url(user), "").await;
        let waits = tokio::time::timeout(Duration::from_secs(5), client.waits())
            .await
            .expect("Client::waits hangs");
        eprintln!("{user}: {waits:?}");
        assert!(
            matches!(waits, Err(Error::Redis { .. })),
            "{user}: {waits:?}"
        );
    }
    let client = detecting_under(&url("noinfo"), "").await;
    assert_eq!(client.waits().await.unwrap(), [waiting("n:ok", "dl:ok")]);
}

/// A server that stops answering (frozen by SIGSTOP, `CLIENT PAUSE ALL`,
/// `DEBUG SLEEP`) makes `Client::waits` a timeout error within about the
/// response timeout (500 ms here), not a hang; once it answers again, the
/// edges are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_on_a_server_that_stops_answering_times_out() {
    let server = testkit::RedisServer::builder()
        .arg("enable-debug-command", "yes")
        .start()
        .expect("start redis-server");
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "").await;
    set_raw(
        &mut admin,
        redlatch::deadlock::wait_key("", "n:ok", None),
        "dl:ok",
    )
    .await;
    for how in ["sigstop", "client pause", "debug sleep"] {
        assert_eq!(client.waits().await.unwrap(), [waiting("n:ok", "dl:ok")]);
        let mut sleeper = None;
        match how {
            "sigstop" => server.pause().unwrap(),
            "client pause" => {
                let _: () = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(2000)
                    .arg("ALL")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
            }
            _ => {
                let mut own = common::admin(&server).await;
                sleeper = Some(tokio::spawn(async move {
                    let _: () = redis::cmd("DEBUG")
                        .arg("SLEEP")
                        .arg(2)
                        .query_async(&mut own)
                        .await
                        .expect("DEBUG SLEEP");
                }));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let began = Instant::now();
        let waits = tokio::time::timeout(Duration::from_secs(10), client.waits())
            .await
            .unwrap_or_else(|_| panic!("{how}: Client::waits hangs"));
        let took = began.elapsed();
        eprintln!("{how}: {waits:?} after {took:?}");
        assert!(
            matches!(waits, Err(Error::ResponseTimeout { .. })),
            "{how}: {waits:?}"
        );
        assert!(took < Duration::from_millis(1500), "{how}: {took:?}");
        if how == "sigstop" {
            server.resume().unwrap();
        }
        if let Some(sleeper) = sleeper {
            sleeper.await.unwrap();
        }
        let back = common::eventually(Duration::from_secs(5), || {
            let client = client.clone();
            async move { client.waits().await.is_ok() }
        })
        .await;
        assert!(back, "{how}: Client::waits never worked again");
    }
}

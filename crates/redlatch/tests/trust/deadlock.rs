//! Deadlock detection (`redlatch::deadlock`): a wait that would close a
//! wait-for cycle is refused with `Error::Deadlock`, to one party of the
//! cycle, at once; a wait that closes none (locks taken in one order, a
//! member that gave up or was cancelled) never is; and an acquire that
//! does not wait runs no check and writes no edge.
//!
//! `REDLATCH_DEADLOCK_SCHEDULES` sets how many random schedules the
//! no-false-deadlock test runs (default 1,000; a long run: 100000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::deadlock::Waiting;
use redlatch::{Client, Error, Guard, WaitLink};
use tokio::sync::Barrier;

use crate::common;
use crate::deadlock_support::{LONG, detecting_under, edges, until_edges, until_no_edge};
use crate::support::info_counter;

/// How soon after its wait began a closer must be refused. The issue asks
/// for 100 ms; the bound leaves room for a loaded 2-core CI machine, and
/// each test prints what it measured.
const REFUSED_WITHIN: Duration = Duration::from_millis(500);

/// The locks a cycle names, sorted.
fn locks_of(cycle: &[WaitLink]) -> Vec<String> {
    let mut locks: Vec<String> = cycle.iter().map(|link| link.lock.clone()).collect();
    locks.sort();
    locks
}

/// Takes `first`, meets the other party at `barrier`, then waits for
/// `second`: returns how that ended, when its wait began, and the first
/// guard (kept until the caller drops it).
async fn first_then_second(
    client: Client,
    first: &'static str,
    second: &'static str,
    barrier: Arc<Barrier>,
) -> (Result<Guard, Error>, Instant, Duration, Guard) {
    let held = client.lock(first).acquire().await.expect("first lock");
    barrier.wait().await;
    let began = Instant::now();
    let outcome = client.lock(second).acquire_within(Some(LONG)).await;
    (outcome, began, began.elapsed(), held)
}

/// Two clients, two tasks, L1 then L2 and L2 then L1, both waits begun at
/// once: exactly one is refused, naming both locks, at once; the other
/// takes its second lock once the refused one drops its first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_orders_refuse_exactly_one_party_at_once() {
    let server = common::server();
    for round in 0..5 {
        let (a, b) = (
            common::detecting_client(&server).await,
            common::detecting_client(&server).await,
        );
        let barrier = Arc::new(Barrier::new(2));
        let (l1, l2): (&'static str, &'static str) = match round % 2 {
            0 => ("dl:opp:1", "dl:opp:2"),
            _ => ("dl:opp:x", "dl:opp:y"),
        };
        let mut one = tokio::spawn(first_then_second(a, l1, l2, barrier.clone()));
        let mut two = tokio::spawn(first_then_second(b, l2, l1, barrier));
        // The refused one ends first; its first guard dropped lets the other in.
        let (first_done, other) = tokio::select! {
            done = &mut one => (done.unwrap(), two),
            done = &mut two => (done.unwrap(), one),
        };
        let (outcome, _, took, held) = first_done;
        let Err(Error::Deadlock { cycle }) = outcome else {
            panic!("round {round}: the first to end was not refused: {outcome:?}");
        };
        eprintln!(
            "round {round}: refused {took:?} after its wait began: {}",
            Error::Deadlock {
                cycle: cycle.clone()
            }
        );
        assert!(took <= REFUSED_WITHIN, "refused after {took:?}");
        assert_eq!(locks_of(&cycle), vec![l1.to_owned(), l2.to_owned()]);
        drop(held);
        let (outcome, _, _, held) = tokio::time::timeout(LONG, other)
            .await
            .expect("the other party proceeds")
            .unwrap();
        let guard = outcome.expect("the other party takes its second lock");
        drop((guard, held));
    }
    let admin = common::admin(&server).await;
    assert!(
        until_no_edge(&admin, LONG).await,
        "a wait-for edge was left behind"
    );
}

/// The cycle closes when the second waiter begins: it is refused, timed
/// from its wait's start, and the message names each lock and holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closer_is_refused_within_the_bound_and_the_message_names_the_cycle() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    // Each task takes its first lock itself: a hold counts for the task
    // that acquired it. The closer holds its first lock before the waiter
    // starts (the waiter used to take both locks first now and then, and
    // the closer's first acquire then waited for ever).
    let (go, ready) = tokio::sync::oneshot::channel::<()>();
    let (held, holding) = tokio::sync::oneshot::channel();
    let closer = tokio::spawn(async move {
        let first_b = b
            .lock("dl:close:2")
            .acquire_within(Some(LONG))
            .await
            .unwrap();
        held.send(()).unwrap();
        ready.await.unwrap();
        let began = Instant::now();
        let outcome = b.lock("dl:close:1").acquire_within(Some(LONG)).await;
        (outcome, began.elapsed(), first_b)
    });
    tokio::time::timeout(LONG, holding)
        .await
        .expect("the closer took its first lock")
        .unwrap();
    let waiter = tokio::spawn(async move {
        let first_a = a
            .lock("dl:close:1")
            .acquire_within(Some(LONG))
            .await
            .unwrap();
        let outcome = a.lock("dl:close:2").acquire_within(Some(LONG)).await;
        (outcome, first_a)
    });
    until_edges(&admin, 1).await;
    go.send(()).unwrap();
    let (outcome, took, first_b) = tokio::time::timeout(LONG * 2, closer)
        .await
        .expect("the closer's wait ends")
        .unwrap();
    let Err(error @ Error::Deadlock { .. }) = outcome else {
        panic!("the closer was not refused: {outcome:?}");
    };
    eprintln!("closer refused {took:?} after its wait began");
    assert!(took <= REFUSED_WITHIN, "refused after {took:?}");
    let text = error.to_string();
    for part in ["dl:close:1", "dl:close:2", "held by"] {
        assert!(text.contains(part), "{text}");
    }
    assert!(!error.is_transient());
    assert!(!waiter.is_finished(), "the first waiter was refused too");
    drop(first_b);
    let (outcome, _first_a) = tokio::time::timeout(LONG, waiter).await.unwrap().unwrap();
    drop(outcome.expect("the first waiter proceeds once the closer lets go"));
}

/// An anonymous acquire of a lock its own task holds waits for itself: a
/// cycle of one, refused at once rather than waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_acquiring_its_own_lock_again_is_refused() {
    let server = common::server();
    let client = common::detecting_client(&server).await;
    let outcome = tokio::spawn(async move {
        let lock = client.lock("dl:self");
        let held = lock.acquire().await.unwrap();
        // A single try waits for nothing: busy, not a deadlock.
        assert!(lock.try_acquire().await.unwrap().is_none());
        let began = Instant::now();
        let again = tokio::time::timeout(LONG, lock.acquire()).await;
        (again, began.elapsed(), held)
    })
    .await
    .unwrap();
    let (again, took, held) = outcome;
    let Ok(Err(Error::Deadlock { cycle })) = again else {
        panic!("not refused: {:?}", again.map(|outcome| outcome.map(drop)));
    };
    eprintln!("self-cycle refused after {took:?}");
    assert!(took <= REFUSED_WITHIN, "{took:?}");
    assert_eq!(cycle.len(), 1, "{cycle:?}");
    assert_eq!(cycle[0].lock, "dl:self");
    assert_eq!(cycle[0].holder, held.owner());
    assert_eq!(cycle[0].party, redlatch::deadlock::party_of(held.owner()));
}

/// Another task of the same client is another party: it waits, and takes
/// the lock once released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_task_of_the_same_client_waits() {
    let server = common::server();
    let client = common::detecting_client(&server).await;
    let held = client.lock("dl:tasks").acquire().await.unwrap();
    let other = client.clone();
    let waiter =
        tokio::spawn(async move { other.lock("dl:tasks").acquire_within(Some(LONG)).await });
    let admin = common::admin(&server).await;
    until_edges(&admin, 1).await;
    assert!(!waiter.is_finished());
    drop(held);
    drop(waiter.await.unwrap().expect("the other task acquires"));
}

/// How many random schedules run (`REDLATCH_DEADLOCK_SCHEDULES`).
fn schedules() -> usize {
    std::env::var("REDLATCH_DEADLOCK_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

/// Parties of one schedule, and locks.
const PARTIES: usize = 4;
const LOCKS: usize = 3;

/// Random schedules of 4 parties over 3 locks, each party taking a random
/// subset of the locks in one global order (so no cycle can exist), holding
/// briefly and releasing in a random order: no deadlock is ever reported.
/// The schedules run many at once (each on its own lock names), the
/// parties spread over two clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_taken_in_one_order_never_report_a_deadlock() {
    let server = common::server();
    let clients = [
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    ];
    let mut rng = common::Rng::from_env();
    let total = schedules();
    let at_once = 50;
    let mut contended_before = info_counter(&server, "commandstats", "cmdstat_hkeys").await;
    let started = Instant::now();
    let mut done = 0;
    while done < total {
        let batch = at_once.min(total - done);
        let mut parties = Vec::new();
        for schedule in done..done + batch {
            for party in 0..PARTIES {
                let client = clients[party % 2].clone();
                // A non-empty subset of the locks, in their order.
                let subset = 1 + rng.below((1 << LOCKS) - 1);
                let names: Vec<String> = (0..LOCKS)
                    .filter(|lock| subset & (1 << lock) != 0)
                    .map(|lock| format!("dl:order:{schedule}:{lock}"))
                    .collect();
                let hold = Duration::from_micros(rng.below(2_000));
                let reverse = rng.below(2) == 0;
                parties.push(tokio::spawn(async move {
                    let mut guards = Vec::new();
                    for name in &names {
                        match client.lock(name.as_str()).acquire_within(Some(LONG)).await {
                            Ok(guard) => guards.push(guard),
                            Err(error) => return Err(format!("{name}: {error}")),
                        }
                    }
                    tokio::time::sleep(hold).await;
                    if reverse {
                        guards.reverse();
                    }
                    for guard in guards {
                        guard.release().await.map_err(|error| error.to_string())?;
                    }
                    Ok(())
                }));
            }
        }
        for party in parties {
            if let Err(error) = party.await.unwrap() {
                panic!("a schedule without a cycle failed: {error}");
            }
        }
        done += batch;
    }
    let checks = info_counter(&server, "commandstats", "cmdstat_hkeys").await - contended_before;
    contended_before = checks;
    eprintln!(
        "{total} schedules of {PARTIES} parties over {LOCKS} locks in {:?}: no deadlock ({contended_before} lock reads by checks)",
        started.elapsed()
    );
    assert!(
        checks > 0,
        "no schedule ever waited: the test checked nothing"
    );
}

/// A member of a would-be cycle whose wait timed out, or whose acquire was
/// dropped while waiting, leaves no edge: the party that comes later waits
/// (and proceeds) rather than being refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_timed_out_or_was_cancelled_closes_no_cycle() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    for cancelled in [false, true] {
        let (a, b) = (
            common::detecting_client(&server).await,
            common::detecting_client(&server).await,
        );
        let (l1, l2) = if cancelled {
            ("dl:gone:c1", "dl:gone:c2")
        } else {
            ("dl:gone:t1", "dl:gone:t2")
        };
        let held_b = b.lock(l2).acquire().await.unwrap();
        let member = {
            let a = a.clone();
            tokio::spawn(async move {
                let held_a = a.lock(l1).acquire().await.unwrap();
                if cancelled {
                    // Dropped while it waits, once its edge is written.
                    let lock = a.lock(l2);
                    let outcome =
                        tokio::time::timeout(Duration::from_millis(300), lock.acquire()).await;
                    assert!(outcome.is_err(), "acquired a held lock");
                } else {
                    let outcome = a
                        .lock(l2)
                        .acquire_within(Some(Duration::from_millis(300)))
                        .await;
                    assert!(
                        matches!(outcome, Err(Error::Timeout { .. })),
                        "{:?}",
                        outcome.map(drop)
                    );
                }
                held_a
            })
        };
        let held_a = member.await.unwrap();
        if cancelled {
            // The cancelled wait's edge goes in the background.
            assert!(
                until_no_edge(&admin, LONG).await,
                "a wait-for edge was left behind"
            );
        } else {
            assert!(
                edges(&mut admin).await.is_empty(),
                "the timed-out wait left its edge"
            );
        }
        let later = tokio::spawn(async move {
            let outcome = b.lock(l1).acquire_within(Some(LONG)).await;
            (outcome, held_b)
        });
        until_edges(&admin, 1).await;
        assert!(!later.is_finished(), "the later party did not wait");
        drop(held_a);
        let (outcome, _held_b) = later.await.unwrap();
        drop(outcome.expect("the later party proceeds, never refused"));
    }
}

/// A named owner is one party in every client: `x` on one client waits for
/// what `y` holds while `x` on another client holds what `y` waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_owner_is_one_party_across_clients() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (c1, c2, c3) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let held_x = c1
        .lock("dl:named:1")
        .with_owner("x")
        .acquire()
        .await
        .unwrap();
    let held_y = c2
        .lock("dl:named:2")
        .with_owner("y")
        .acquire()
        .await
        .unwrap();
    let x_elsewhere = tokio::spawn(async move {
        c3.lock("dl:named:2")
            .with_owner("x")
            .acquire_within(Some(LONG))
            .await
    });
    until_edges(&admin, 1).await;
    let outcome = c2
        .lock("dl:named:1")
        .with_owner("y")
        .acquire_within(Some(LONG))
        .await;
    let Err(Error::Deadlock { cycle }) = outcome else {
        panic!("not refused: {:?}", outcome.map(drop));
    };
    let parties: Vec<&str> = cycle.iter().map(|link| link.party.as_str()).collect();
    assert_eq!(parties, ["n:x", "n:y"], "{cycle:?}");
    drop(held_y);
    drop(
        x_elsewhere
            .await
            .unwrap()
            .expect("x on the third client proceeds"),
    );
    drop(held_x);
}

/// An acquire that does not wait runs no check and writes no edge: 100
/// uncontended cycles leave the check's reads (HKEYS, which no other
/// script of the lock runs) at 0 and no wait-for key; one contended wait
/// moves both (the probe measures what it should).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_uncontended_path_checks_and_writes_nothing() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = common::detecting_client(&server).await;
    let lock = client.lock("dl:quiet");
    for _ in 0..100 {
        lock.acquire().await.unwrap().release().await.unwrap();
    }
    assert_eq!(
        info_counter(&server, "commandstats", "cmdstat_hkeys").await,
        0
    );
    assert!(edges(&mut admin).await.is_empty());
    let held = lock.acquire().await.unwrap();
    let other = client.clone();
    let waiter = tokio::spawn(async move { other.lock("dl:quiet").acquire().await });
    until_edges(&admin, 1).await;
    assert!(info_counter(&server, "commandstats", "cmdstat_hkeys").await > 0);
    drop(held);
    drop(waiter.await.unwrap().unwrap());
    assert!(
        until_no_edge(&admin, LONG).await,
        "a wait-for edge was left behind"
    );
}

/// Off by default: a cycle is not looked for, the closer waits (its
/// bounded wait runs out) and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detection_is_off_by_default_and_looks_for_nothing() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = Client::builder(&server.url()).connect().await.unwrap();
    let outcome = tokio::spawn(async move {
        let lock = client.lock("dl:off");
        let _held = lock.acquire().await.unwrap();
        lock.acquire_within(Some(Duration::from_millis(200)))
            .await
            .map(drop)
    })
    .await
    .unwrap();
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
    assert!(edges(&mut admin).await.is_empty());
    assert_eq!(
        info_counter(&server, "commandstats", "cmdstat_hkeys").await,
        0
    );
}

/// What one kind of lock's acquire of `name` gives: a hold kept as long as
/// the value lives, or the error.
type Take = fn(
    Client,
    String,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Box<dyn std::any::Any + Send>, Error>> + Send>,
>;

/// Every lock kind that takes part in deadlock detection, by its acquire.
const KINDS: &[(&str, Take)] = &[
    ("lock", |c, n| {
        Box::pin(async move { Ok(Box::new(c.lock(n).acquire_within(Some(LONG)).await?) as _) })
    }),
    ("fair lock", |c, n| {
        Box::pin(async move { Ok(Box::new(c.fair_lock(n).acquire_within(Some(LONG)).await?) as _) })
    }),
    ("spin lock", |c, n| {
        Box::pin(async move { Ok(Box::new(c.spin_lock(n).acquire_within(Some(LONG)).await?) as _) })
    }),
    ("token lock", |c, n| {
        Box::pin(
            async move { Ok(Box::new(c.token_lock(n).acquire_within(Some(LONG)).await?) as _) },
        )
    }),
    ("read-write lock, writing", |c, n| {
        Box::pin(
            async move { Ok(Box::new(c.read_write_lock(n).write_within(Some(LONG)).await?) as _) },
        )
    }),
];

/// Each kind: a task taking its own lock again is refused (a cycle of
/// one), and two tasks taking two locks of that kind in opposite orders:
/// one refused, the other proceeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_that_takes_part_is_refused_a_cycle() {
    let server = common::server();
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    for (kind, take) in KINDS {
        let name = format!("dl:kind:{kind}");
        let client = a.clone();
        let again = tokio::spawn(async move {
            let _held = take(client.clone(), name.clone()).await.unwrap();
            take(client, name).await.map(drop)
        })
        .await
        .unwrap();
        assert!(
            matches!(&again, Err(Error::Deadlock { cycle }) if cycle.len() == 1),
            "{kind}: {again:?}"
        );
        let barrier = Arc::new(Barrier::new(2));
        let (l1, l2) = (format!("dl:kind:{kind}:1"), format!("dl:kind:{kind}:2"));
        let pair = |client: Client, first: String, second: String, barrier: Arc<Barrier>| async move {
            let held = take(client.clone(), first).await.unwrap();
            barrier.wait().await;
            let outcome = take(client, second).await.map(drop);
            (outcome, held)
        };
        let mut one = tokio::spawn(pair(a.clone(), l1.clone(), l2.clone(), barrier.clone()));
        let mut two = tokio::spawn(pair(b.clone(), l2, l1, barrier));
        let ((outcome, held), other) = tokio::select! {
            done = &mut one => (done.unwrap(), two),
            done = &mut two => (done.unwrap(), one),
        };
        assert!(
            matches!(&outcome, Err(Error::Deadlock { cycle }) if cycle.len() == 2),
            "{kind}: {outcome:?}"
        );
        drop(held);
        let (outcome, _held) = tokio::time::timeout(LONG, other).await.unwrap().unwrap();
        assert!(outcome.is_ok(), "{kind}: the other party: {outcome:?}");
    }
}

/// A cycle across kinds: a token lock's holder waits for a fair lock
/// whose holder waits for the token lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_across_kinds_is_found() {
    let server = common::server();
    let (a, b) = (
        common::detecting_client(&server).await,
        common::detecting_client(&server).await,
    );
    let barrier = Arc::new(Barrier::new(2));
    let (go_a, go_b) = (barrier.clone(), barrier);
    let one = tokio::spawn(async move {
        let held = a.token_lock("dl:mixed:token").acquire().await.unwrap();
        go_a.wait().await;
        let outcome = a
            .fair_lock("dl:mixed:fair")
            .acquire_within(Some(LONG))
            .await
            .map(drop);
        (outcome, held)
    });
    let two = tokio::spawn(async move {
        let held = b.fair_lock("dl:mixed:fair").acquire().await.unwrap();
        go_b.wait().await;
        let outcome = b
            .token_lock("dl:mixed:token")
            .acquire_within(Some(LONG))
            .await
            .map(drop);
        (outcome, held)
    });
    let (mut one, mut two) = (one, two);
    let refused = tokio::select! {
        done = &mut one => { let (outcome, held) = done.unwrap(); drop(held); (outcome, two.await.unwrap().0) }
        done = &mut two => { let (outcome, held) = done.unwrap(); drop(held); (outcome, one.await.unwrap().0) }
    };
    assert!(
        matches!(refused.0, Err(Error::Deadlock { .. })),
        "{:?}",
        refused.0
    );
    assert!(refused.1.is_ok(), "{:?}", refused.1);
}

/// The blocking facade: each call runs in a task of its own, and its
/// acquires count for the calling thread. A thread acquiring its own lock
/// again is refused; two threads in opposite orders, one of them refused.
#[test]
fn blocking_calls_count_for_their_thread() {
    let server = common::server();
    let url = server.url();
    let client =
        redlatch::blocking::Client::connect_with(Client::builder(&url).deadlock_detection(true))
            .unwrap();
    let lock = client.lock("dl:blocking:self");
    let held = lock.acquire().unwrap();
    let again = lock.acquire_within(Some(LONG)).map(drop);
    assert!(
        matches!(&again, Err(Error::Deadlock { cycle }) if cycle.len() == 1 && cycle[0].party.contains("@t")),
        "{again:?}"
    );
    drop(held);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let (done, finished) = std::sync::mpsc::channel();
    let threads: Vec<_> = [
        ("dl:blocking:1", "dl:blocking:2"),
        ("dl:blocking:2", "dl:blocking:1"),
    ]
    .into_iter()
    .map(|(first, second)| {
        let (client, barrier, done) = (client.clone(), barrier.clone(), done.clone());
        std::thread::spawn(move || {
            let held = client.lock(first).acquire().unwrap();
            barrier.wait();
            let outcome = client.lock(second).acquire_within(Some(LONG)).map(drop);
            let refused = matches!(outcome, Err(Error::Deadlock { .. }));
            done.send(refused).unwrap();
            // The refused one lets go at once; the other holds until it got its second.
            drop(held);
            outcome.is_ok() || refused
        })
    })
    .collect();
    let first = finished.recv_timeout(LONG).unwrap();
    let second = finished.recv_timeout(LONG).unwrap();
    assert!(first && !second, "refused: first {first}, second {second}");
    for thread in threads {
        assert!(thread.join().unwrap());
    }
}

/// A guard dropped (released in the background) and its lock acquired
/// again at once by the same task, or an acquire cancelled just as it took
/// the lock (given back in the background) and tried again: the old hold,
/// still in Redis for a moment, is the task's own party but no live hold of
/// it, and waiting for it is no deadlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_being_given_back_is_no_cycle_of_one() {
    let server = common::server();
    let client = common::detecting_client(&server).await;
    let outcome = tokio::spawn(async move {
        let lock = client.lock("dl:given-back");
        for round in 0..200u64 {
            let guard = lock.acquire_within(Some(LONG)).await?;
            drop(guard);
            let guard = lock.acquire_within(Some(LONG)).await?;
            drop(guard);
            // Cut off somewhere between sent and answered.
            let cut = Duration::from_micros(round % 20 * 25);
            let _ = tokio::time::timeout(cut, lock.acquire()).await;
        }
        Ok::<(), Error>(())
    })
    .await
    .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
}

/// The script's party rule (`party_of` in `deadlock_check.lua`) and the
/// library's (`redlatch::deadlock::party_of`, which tools use) agree on
/// every form of owner field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_and_the_library_name_the_same_parties() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/deadlock/deadlock_check.lua"
    ))
    .unwrap();
    let uuid = source
        .lines()
        .find(|line| line.starts_with("local UUID = "))
        .expect("the script's UUID pattern");
    let start = source
        .find("local function party_of(field)")
        .expect("the script's party_of");
    let end = start + source[start..].find("\nend\n").expect("its end") + 5;
    let script = format!(
        "{uuid}\n{}\nlocal out = {{}}\nfor i, f in ipairs(ARGV) do out[i] = party_of(f) end\nreturn out",
        &source[start..end]
    );
    let id = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11";
    let fields: Vec<String> = [
        "#7@42",
        "#7@42:write",
        "#0@t3",
        "#7",
        "#7@",
        "worker",
        "job:12:write",
        "a@b",
        "57",
        "x:write",
        "#",
        "#@5",
    ]
    .iter()
    .map(|rest| format!("{id}:{rest}"))
    .chain([
        "permit-id".to_owned(),
        format!("{id}:"),
        format!("{}:x", id.to_uppercase()),
    ])
    .collect();
    let parties: Vec<String> = redis::cmd("EVAL")
        .arg(&script)
        .arg(0)
        .arg(&fields)
        .query_async(&mut admin)
        .await
        .unwrap();
    for (field, party) in fields.iter().zip(&parties) {
        assert_eq!(*party, redlatch::deadlock::party_of(field), "{field}");
    }
}

/// A wait-for edge is a string with an expiry, and so is a waiter's claim
/// of the next turn: the listing of locks (and the CLI's `list`, `top` on
/// it) must not take either for a token lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_shows_no_wait_for_edge_nor_next_turn_claim() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let client = common::detecting_client(&server).await;
    let held = client.lock("dl:listed").acquire().await.unwrap();
    let other = client.clone();
    let waiter =
        tokio::spawn(async move { other.lock("dl:listed").acquire_within(Some(LONG)).await });
    until_edges(&admin, 1).await;
    // A waiter of 250 ms claims the lock's next turn: a string with an
    // expiry, as an edge is (it used to be listed as a lock).
    let claim = "redlatch_lock_precedence:{dl:listed}";
    let conn = admin.clone();
    let claimed = common::eventually(LONG, move || {
        let mut conn = conn.clone();
        async move {
            redis::cmd("EXISTS")
                .arg(claim)
                .query_async::<bool>(&mut conn)
                .await
                .unwrap()
        }
    })
    .await;
    assert!(claimed, "the waiter never claimed the next turn");
    let listed: Vec<String> = client
        .locks("")
        .await
        .unwrap()
        .into_iter()
        .map(|status| status.name)
        .collect();
    assert_eq!(listed, ["dl:listed"]);
    drop(held);
    drop(waiter.await.unwrap().unwrap());
}

/// `Client::waits` reads each wait-for edge back as its party and the
/// lock's name (without the key prefix), sorted; a client of another key
/// prefix sees none of them, and they are gone once the waits end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_lists_each_waiting_party_and_the_lock_it_waits_for() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let (holder, waiter) = (
        detecting_under(&server.url(), "app:").await,
        detecting_under(&server.url(), "app:").await,
    );
    let stranger = detecting_under(&server.url(), "other:").await;
    let held = [
        holder.lock("dl:waits:1").acquire().await.unwrap(),
        holder.lock("dl:waits:2").acquire().await.unwrap(),
    ];
    let tasks: Vec<_> = [("w2", "dl:waits:2"), ("w1", "dl:waits:1")]
        .into_iter()
        .map(|(owner, name)| {
            let waiter = waiter.clone();
            tokio::spawn(async move {
                waiter
                    .lock(name)
                    .with_owner(owner)
                    .acquire_within(Some(LONG))
                    .await
            })
        })
        .collect();
    until_edges(&admin, 2).await;
    let waits = holder.waits().await.unwrap();
    let expected = [("n:w1", "dl:waits:1"), ("n:w2", "dl:waits:2")].map(|(party, lock)| Waiting {
        party: party.to_owned(),
        lock: lock.to_owned(),
    });
    assert_eq!(waits, expected);
    assert_eq!(stranger.waits().await.unwrap(), []);
    drop(held);
    for task in tasks {
        drop(task.await.unwrap().expect("the waiter acquires once freed"));
    }
    assert!(until_no_edge(&admin, LONG).await, "an edge was left behind");
    assert_eq!(holder.waits().await.unwrap(), []);
}

/// Keys under the edges' prefix that are not edges (another type, no
/// party, a value naming no lock of this prefix) are skipped, not an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_skips_keys_of_the_edges_layout_that_are_no_edge() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = detecting_under(&server.url(), "app:").await;
    let wait_key = |party: &str| redlatch::deadlock::wait_key("app:", party, None);
    let _: () = redis::cmd("HSET")
        .arg(wait_key("n:hash"))
        .arg("f")
        .arg("v")
        .query_async(&mut admin)
        .await
        .unwrap();
    for (key, value) in [
        (wait_key(""), "app:dl:bad:1".to_owned()),
        (wait_key("n:foreign"), "elsewhere:dl:bad:2".to_owned()),
        (
            "app:redlatch_wait:{no-end".to_owned(),
            "app:dl:bad:3".to_owned(),
        ),
    ] {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    assert_eq!(client.waits().await.unwrap(), []);
}

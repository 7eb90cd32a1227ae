//! The deadline test: every bounded acquire returns within its wait (plus a
//! small margin) whatever the server does: frozen (SIGSTOP), slow (latency
//! through the testkit's proxy, longer than the wait) or dead (killed:
//! connection refused). A wait cut short while Redis had not answered
//! names the limit that ran out: the caller's wait.
//!
//! Where the server answers "held" (a little latency), each ends not
//! acquired, never with an error blaming the server.
//!
//! Table-driven: a new primitive is one row of [`WAYS`], a new fault one of
//! [`Fault`]. The rows of one fault run at once, on one client (the
//! default 3 s response timeout, longer than the wait: the shape of the
//! defect, where a 500 ms wait took 12.7 s).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redlatch::{Client, Error, MultiLock, TimeLimit};
use testkit::{LinkFaults, Proxy};

/// The wait every row asks for.
const WAIT: Duration = Duration::from_millis(500);

/// Room above the wait on a loaded 2-core machine (the defect was 4-25x).
const MARGIN: Duration = Duration::from_secs(1);

/// A bounded acquire of one primitive: what it returned, as an error or
/// `Ok(())` when it took (and dropped) the lock.
type Acquire =
    fn(Client, &'static str, Duration) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// What another client holds so that the acquire of the same name waits.
type Hold = fn(Client, &'static str) -> Pin<Box<dyn Future<Output = Held> + Send>>;

/// Kept for the whole wait.
type Held = Box<dyn std::any::Any + Send>;

/// One way to wait with a bound: its name, the acquire, and a hold that
/// keeps it waiting.
struct Way {
    name: &'static str,
    acquire: Acquire,
    hold: Hold,
}

/// Holds the plain lock `name` (the fixed-lease, named-owner and spin rows
/// share its key).
fn hold_lock(c: Client, n: &'static str) -> Pin<Box<dyn Future<Output = Held> + Send>> {
    Box::pin(async move { Box::new(c.lock(n).acquire().await.unwrap()) as Held })
}

/// Every way to wait with a bound on one server.
const WAYS: &[Way] = &[
    Way {
        name: "lock",
        acquire: |c, n, w| {
            Box::pin(async move { c.lock(n).acquire_within(Some(w)).await.map(drop) })
        },
        hold: hold_lock,
    },
    Way {
        name: "fixed-lease lock",
        acquire: |c, n, w| {
            Box::pin(async move {
                let lease = Duration::from_secs(10);
                c.lock(n)
                    .with_lease(lease)
                    .acquire_within(Some(w))
                    .await
                    .map(drop)
            })
        },
        hold: hold_lock,
    },
    Way {
        name: "named-owner lock",
        acquire: |c, n, w| {
            Box::pin(async move {
                c.lock(n)
                    .with_owner("deadline")
                    .acquire_within(Some(w))
                    .await
                    .map(drop)
            })
        },
        hold: hold_lock,
    },
    Way {
        name: "fair lock",
        acquire: |c, n, w| {
            Box::pin(async move { c.fair_lock(n).acquire_within(Some(w)).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.fair_lock(n).acquire().await.unwrap()) as Held })
        },
    },
    Way {
        name: "spin lock",
        acquire: |c, n, w| {
            Box::pin(async move { c.spin_lock(n).acquire_within(Some(w)).await.map(drop) })
        },
        hold: hold_lock,
    },
    Way {
        name: "read",
        acquire: |c, n, w| {
            Box::pin(async move { c.read_write_lock(n).read_within(Some(w)).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.read_write_lock(n).write().await.unwrap()) as Held })
        },
    },
    Way {
        name: "write",
        acquire: |c, n, w| {
            Box::pin(async move { c.read_write_lock(n).write_within(Some(w)).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.read_write_lock(n).read().await.unwrap()) as Held })
        },
    },
    Way {
        name: "semaphore",
        acquire: |c, n, w| {
            Box::pin(async move { c.semaphore(n).acquire_within(Some(w)).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move {
                let semaphore = c.semaphore(n);
                semaphore.try_set_permits(1).await.unwrap();
                Box::new(semaphore.acquire().await.unwrap()) as Held
            })
        },
    },
    Way {
        name: "permit semaphore",
        acquire: |c, n, w| {
            Box::pin(async move {
                c.permit_semaphore(n)
                    .acquire_within(Some(w))
                    .await
                    .map(drop)
            })
        },
        hold: |c, n| {
            Box::pin(async move {
                let semaphore = c.permit_semaphore(n);
                semaphore.try_set_permits(1).await.unwrap();
                Box::new(semaphore.acquire().await.unwrap()) as Held
            })
        },
    },
    Way {
        name: "multi-lock",
        acquire: |c, n, w| {
            Box::pin(async move {
                let locks = [c.lock(format!("{n}-a")), c.lock(format!("{n}-b"))];
                MultiLock::new(locks)
                    .acquire_within(Some(w))
                    .await
                    .map(drop)
            })
        },
        // The first lock in key order: the second is reached with what the
        // first left of the wait, which a slow round trip may not fit.
        hold: |c, n| {
            Box::pin(
                async move { Box::new(c.lock(format!("{n}-a")).acquire().await.unwrap()) as Held },
            )
        },
    },
];

/// What the server does during the wait.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGSTOP: connections stay open, nothing answers.
    Frozen,
    /// Every reply takes longer than the wait (a proxy's latency).
    Slow,
    /// Killed: connections are refused.
    Dead,
    /// Answers, through 100 ms of latency each way (a fifth of the wait),
    /// that another client holds it: not acquired, never an error blaming
    /// the server, even when the wait ends with an attempt in flight.
    HeldBehindLatency,
}

/// Runs every row of [`WAYS`] at once under `fault`; returns each row's
/// name, outcome and time.
async fn every_way_under(fault: Fault) -> Vec<(&'static str, Result<(), Error>, Duration)> {
    let mut server = crate::common::server();
    let proxy = Proxy::start(server.addr()).unwrap();
    // Through the proxy only when it adds latency: a dead server refuses
    // connections itself.
    let url = match fault {
        Fault::Slow | Fault::HeldBehindLatency => proxy.url(),
        Fault::Frozen | Fault::Dead => server.url(),
    };
    let holder = Client::connect(&server.url()).await.unwrap();
    let mut held = Vec::new();
    let client = Client::builder(&url)
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    // Warm: the connection, the scripts and a subscription exist before the fault.
    client
        .lock("warm")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    match fault {
        Fault::Frozen => server.pause().unwrap(),
        Fault::Slow => proxy.set_both(LinkFaults {
            latency: WAIT * 4,
            ..LinkFaults::default()
        }),
        Fault::Dead => server.kill().unwrap(),
        Fault::HeldBehindLatency => {
            for way in WAYS {
                held.push((way.hold)(holder.clone(), way.name).await);
            }
            proxy.set_both(LinkFaults {
                latency: Duration::from_millis(100),
                ..LinkFaults::default()
            });
        }
    }
    let rows = WAYS.iter().map(|way| {
        let client = client.clone();
        async move {
            let started = Instant::now();
            let outcome = (way.acquire)(client, way.name, WAIT).await;
            (way.name, outcome, started.elapsed())
        }
    });
    let outcomes = futures_util::future::join_all(rows).await;
    if matches!(fault, Fault::Frozen) {
        server.resume().unwrap();
    }
    outcomes
}

/// Each row returned within its wait plus [`MARGIN`], with an error that
/// says why: the caller's wait named as the limit that ran out while the
/// server was silent, a connection error while it was dead.
fn assert_bounded(fault: Fault, outcomes: &[(&'static str, Result<(), Error>, Duration)]) {
    let mut wrong = Vec::new();
    for (name, outcome, took) in outcomes {
        eprintln!("{fault:?} server: {name} after {took:?}: {outcome:?}");
        let why = match (fault, outcome) {
            _ if *took > WAIT + MARGIN => Some(format!("took {took:?}")),
            (Fault::Frozen | Fault::Slow, Err(Error::ResponseTimeout { limit, .. }))
                if *limit == TimeLimit::Wait(WAIT) =>
            {
                None
            }
            (Fault::Dead, Err(error)) if error.is_transient() => None,
            (Fault::HeldBehindLatency, Err(Error::Timeout { .. } | Error::NoPermits { .. })) => {
                None
            }
            (_, outcome) => Some(format!("returned {outcome:?}")),
        };
        if let Some(why) = why {
            wrong.push(format!("{name}: {why} ({outcome:?})"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{fault:?} server, {WAIT:?} wait:\n{}",
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_acquire_returns_within_its_wait_from_a_frozen_server() {
    let outcomes = every_way_under(Fault::Frozen).await;
    assert_bounded(Fault::Frozen, &outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_acquire_returns_within_its_wait_from_a_slow_server() {
    let outcomes = every_way_under(Fault::Slow).await;
    assert_bounded(Fault::Slow, &outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_acquire_ends_not_acquired_within_its_wait_from_a_slow_server_that_answers_held()
 {
    let outcomes = every_way_under(Fault::HeldBehindLatency).await;
    assert_bounded(Fault::HeldBehindLatency, &outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bounded_acquire_returns_within_its_wait_from_a_dead_server() {
    let outcomes = every_way_under(Fault::Dead).await;
    assert_bounded(Fault::Dead, &outcomes);
}

/// Rounds of [`bounded_waits_cut_off_at_random_leave_nothing_behind_and_the_next_waiter_is_served`];
/// `REDLATCH_DEADLINE_ROUNDS` for a long run (docs/TESTING.md).
fn cut_off_rounds() -> u64 {
    std::env::var("REDLATCH_DEADLINE_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(30)
}

/// Waits that end before, around and after a round trip through the
/// proxy's latency (a few below the engine's 25 ms attempt floor).
const CUT_OFF_WAITS_MS: [u64; 7] = [1, 5, 24, 30, 45, 80, 150];

/// Red team: bounded waits that run out at random moments (an attempt in
/// flight, a place or a claim just written, Redis answering after the
/// cut-off) on every primitive with something that waiting leaves in Redis
/// (a fair lock's place, a writer's claim, a next-turn claim, permits, a
/// multi-lock's first lock while it waits for the second),
/// and on re-entries of a named owner that holds the lock throughout. Once
/// the background give-backs have landed: the named owner's outer hold is
/// the only hold left, every permit is back, and a fresh waiter on every
/// primitive is served at once (no place, claim or hold left to wait out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_waits_cut_off_at_random_leave_nothing_behind_and_the_next_waiter_is_served() {
    let server = crate::common::server();
    let proxy = Proxy::start(server.addr()).unwrap();
    proxy.set_both(LinkFaults {
        latency: Duration::from_millis(15),
        jitter: Duration::from_millis(15),
        ..LinkFaults::default()
    });
    let lease = Duration::from_secs(2);
    let client = crate::common::client_at(&proxy.url(), lease).await;
    let contender = crate::common::client_with_lease(&server, lease).await;
    let admin = crate::common::admin(&server).await;
    let mut rng = crate::common::Rng::from_env();
    let outer = client
        .lock("cut:named")
        .with_owner("keeper")
        .acquire()
        .await
        .unwrap();
    for name in ["cut:sem", "cut:permits"] {
        if name == "cut:sem" {
            assert!(contender.semaphore(name).try_set_permits(1).await.unwrap());
        } else {
            assert!(
                contender
                    .permit_semaphore(name)
                    .try_set_permits(1)
                    .await
                    .unwrap()
            );
        }
    }
    let started = Instant::now();
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..cut_off_rounds() {
        let wait = Duration::from_millis(CUT_OFF_WAITS_MS[rng.below(7) as usize]);
        let held_for = Duration::from_millis(rng.below(120));
        let contend = rng.below(4) != 0;
        // The contender takes each primitive (most rounds), and gives it
        // back at a random moment of the client's wait.
        let holding = {
            let contender = contender.clone();
            async move {
                if !contend {
                    return;
                }
                let held = (
                    contender.lock("cut:lock").acquire().await.unwrap(),
                    contender.fair_lock("cut:fair").acquire().await.unwrap(),
                    contender.read_write_lock("cut:rw").read().await.unwrap(),
                    contender.semaphore("cut:sem").acquire().await.unwrap(),
                    contender
                        .permit_semaphore("cut:permits")
                        .acquire()
                        .await
                        .unwrap(),
                    // The second in key order: the multi-lock holds the
                    // first while it waits for this one.
                    contender.lock("cut:multi-b").acquire().await.unwrap(),
                );
                tokio::time::sleep(held_for).await;
                drop(held);
            }
        };
        let waits = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let lock = client.lock("cut:lock");
            let named = client.lock("cut:named").with_owner("keeper");
            let fair = client.fair_lock("cut:fair");
            let rw = client.read_write_lock("cut:rw");
            let sem = client.semaphore("cut:sem");
            let permits = client.permit_semaphore("cut:permits");
            let multi = MultiLock::new([client.lock("cut:multi-a"), client.lock("cut:multi-b")]);
            let name = |r: &Result<(), Error>| match r {
                Ok(()) => "taken".to_owned(),
                Err(e) => format!("{e:?}")
                    .split([' ', '{', '('])
                    .next()
                    .unwrap()
                    .to_owned(),
            };
            let rows = tokio::join!(
                async { lock.acquire_within(Some(wait)).await.map(drop) },
                async { named.acquire_within(Some(wait)).await.map(drop) },
                async { fair.acquire_within(Some(wait)).await.map(drop) },
                async { rw.write_within(Some(wait)).await.map(drop) },
                async { sem.acquire_within(Some(wait)).await.map(drop) },
                async { permits.acquire_within(Some(wait)).await.map(drop) },
                async { multi.acquire_within(Some(wait)).await.map(drop) },
            );
            for (way, row) in [
                ("lock", rows.0),
                ("named", rows.1),
                ("fair", rows.2),
                ("write", rows.3),
                ("semaphore", rows.4),
                ("permit", rows.5),
                ("multi", rows.6),
            ] {
                *outcomes.entry(format!("{way} {}", name(&row))).or_default() += 1;
            }
        };
        tokio::join!(holding, waits);
    }
    eprintln!(
        "{} rounds in {:?}: {outcomes:?}",
        cut_off_rounds(),
        started.elapsed()
    );
    // Every give-back has landed: the outer hold only.
    let left = crate::common::settled(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move { crate::common::holds_left(&mut admin, "cut:").await - 1 }
    })
    .await;
    assert_eq!(left, 0, "holds left besides the named owner's outer hold");
    assert!(outer.is_held(), "the outer hold was given back by an undo");
    // The next waiter of every primitive is served at once.
    let fresh = crate::common::client(&server).await;
    let soon = Duration::from_millis(1500);
    let multi = MultiLock::new([fresh.lock("cut:multi-a"), fresh.lock("cut:multi-b")]);
    let served = tokio::join!(
        async {
            fresh
                .lock("cut:lock")
                .acquire_within(Some(soon))
                .await
                .map(drop)
        },
        async { multi.acquire_within(Some(soon)).await.map(drop) },
        async {
            fresh
                .fair_lock("cut:fair")
                .acquire_within(Some(soon))
                .await
                .map(drop)
        },
        async {
            fresh
                .read_write_lock("cut:rw")
                .write_within(Some(soon))
                .await
                .map(drop)
        },
        async {
            fresh
                .semaphore("cut:sem")
                .acquire_within(Some(soon))
                .await
                .map(drop)
        },
        async {
            fresh
                .permit_semaphore("cut:permits")
                .acquire_within(Some(soon))
                .await
                .map(drop)
        },
    );
    assert!(
        served.0.is_ok()
            && served.1.is_ok()
            && served.2.is_ok()
            && served.3.is_ok()
            && served.4.is_ok()
            && served.5.is_ok(),
        "a fresh waiter was not served: {served:?}"
    );
    assert_eq!(
        fresh
            .semaphore("cut:sem")
            .available_permits()
            .await
            .unwrap(),
        1,
        "semaphore permits"
    );
    assert_eq!(
        fresh
            .permit_semaphore("cut:permits")
            .available_permits()
            .await
            .unwrap(),
        1,
        "permit semaphore permits"
    );
    outer.release().await.unwrap();
    // The served guards were dropped: their releases land in the background.
    let left = crate::common::settled(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move { crate::common::holds_left(&mut admin, "cut:").await }
    })
    .await;
    assert_eq!(left, 0, "holds left once every guard is gone");
}

/// Red team: a bounded wait of any length is a wait: below a millisecond,
/// longer than a lease may be (31 days) and `Duration::MAX` each take a
/// free primitive of every kind at once, as they do a lock. Failed before:
/// the fair lock refused the first two with `InvalidDuration` (it checked
/// the wait as a lease: "must be at least 1 ms", "must be at most 30 days"),
/// and `Duration::MAX` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_of_any_length_takes_a_free_primitive() {
    let server = crate::common::server();
    let client = crate::common::client(&server).await;
    assert!(
        client
            .semaphore("any:sem")
            .try_set_permits(1)
            .await
            .unwrap()
    );
    assert!(
        client
            .permit_semaphore("any:permits")
            .try_set_permits(1)
            .await
            .unwrap()
    );
    let mut wrong = Vec::new();
    for wait in [
        Duration::from_micros(500),
        Duration::from_secs(31 * 24 * 3600),
        Duration::MAX,
    ] {
        let rows: [(&str, Result<(), Error>); 8] = [
            (
                "lock",
                client
                    .lock("any:lock")
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "fair lock",
                client
                    .fair_lock("any:fair")
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "spin lock",
                client
                    .spin_lock("any:spin")
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "read",
                client
                    .read_write_lock("any:rw-r")
                    .read_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "write",
                client
                    .read_write_lock("any:rw-w")
                    .write_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "semaphore",
                client
                    .semaphore("any:sem")
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "permit semaphore",
                client
                    .permit_semaphore("any:permits")
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
            (
                "multi-lock",
                MultiLock::new([client.lock("any:m-a"), client.lock("any:m-b")])
                    .acquire_within(Some(wait))
                    .await
                    .map(drop),
            ),
        ];
        for (name, outcome) in rows {
            if let Err(error) = outcome {
                wrong.push(format!("{name}, wait {wait:?}: {error}"));
            }
        }
        // The drops' releases land before the next wait.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A bounded acquire that queued behind a waiter of its own client (the
/// client saw the lock held) and whose wait ran out there ends not
/// acquired, even when the server is slower than the 25 ms floor left for a
/// last attempt: the lock was held when last seen, Redis is slow, not
/// silent. (The model found it on Valkey 8.1.8: with 20 ms of latency each
/// way, `acquire_timeout(500ms)` behind a local waiter gave
/// `ResponseTimeout { limit: Wait(500ms) }`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_ran_out_behind_a_local_waiter_ends_not_acquired_through_latency() {
    let server = crate::common::server();
    let proxy = Proxy::start(server.addr()).unwrap();
    let holder = Client::connect(&server.url()).await.unwrap();
    let held = holder.lock("behind-local").acquire().await.unwrap();
    let client = Client::builder(&proxy.url())
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    proxy.set_both(LinkFaults {
        latency: Duration::from_millis(20),
        ..LinkFaults::default()
    });
    // A waiter of the same client, parked: the next acquire queues behind it.
    let queued = {
        let lock = client.lock("behind-local");
        tokio::spawn(async move { lock.acquire_within(Some(Duration::from_secs(5))).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    for round in 0..3 {
        let started = Instant::now();
        let outcome = client.lock("behind-local").acquire_within(Some(WAIT)).await;
        let took = started.elapsed();
        assert!(
            matches!(outcome, Err(Error::Timeout { .. })),
            "round {round}: {outcome:?} after {took:?}"
        );
        assert!(took <= WAIT + MARGIN, "round {round}: {took:?}");
    }
    held.release().await.unwrap();
    let _ = queued.await;
}

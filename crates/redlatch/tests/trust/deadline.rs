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
        acquire: |c, n, w| Box::pin(async move { c.lock(n).acquire_timeout(w).await.map(drop) }),
        hold: hold_lock,
    },
    Way {
        name: "fixed-lease lock",
        acquire: |c, n, w| {
            Box::pin(async move {
                let lease = Duration::from_secs(10);
                c.lock(n)
                    .acquire_timeout_with_lease(w, lease)
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
                    .acquire_timeout(w)
                    .await
                    .map(drop)
            })
        },
        hold: hold_lock,
    },
    Way {
        name: "fair lock",
        acquire: |c, n, w| {
            Box::pin(async move { c.fair_lock(n).acquire_timeout(w).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.fair_lock(n).acquire().await.unwrap()) as Held })
        },
    },
    Way {
        name: "spin lock",
        acquire: |c, n, w| {
            Box::pin(async move { c.spin_lock(n).acquire_timeout(w).await.map(drop) })
        },
        hold: hold_lock,
    },
    Way {
        name: "read",
        acquire: |c, n, w| {
            Box::pin(async move { c.read_write_lock(n).read_timeout(w).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.read_write_lock(n).write().await.unwrap()) as Held })
        },
    },
    Way {
        name: "write",
        acquire: |c, n, w| {
            Box::pin(async move { c.read_write_lock(n).write_timeout(w).await.map(drop) })
        },
        hold: |c, n| {
            Box::pin(async move { Box::new(c.read_write_lock(n).read().await.unwrap()) as Held })
        },
    },
    Way {
        name: "semaphore",
        acquire: |c, n, w| {
            Box::pin(async move { c.semaphore(n).acquire_timeout(w).await.map(drop) })
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
            Box::pin(async move { c.permit_semaphore(n).acquire_timeout(w).await.map(drop) })
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
                MultiLock::new(locks).acquire_timeout(w).await.map(drop)
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

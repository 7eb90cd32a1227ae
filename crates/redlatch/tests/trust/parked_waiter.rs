//! A parked waiter is one slot in its channel's queue, and one timer task
//! per channel ends the parks whose deadline passed (engine/wakeup.rs).
//! These tests take that timer where it can go wrong: started on a runtime
//! other than the waiter's, on a runtime that shuts down or is not driven,
//! outliving the waiters it was started for; and the slot where a message
//! and a resubscription meet.
//!
//! Each runs on multi-thread runtimes against a real redis-server, with the
//! runtimes made by hand where it counts their tasks
//! (`RuntimeMetrics::num_alive_tasks`: the waiters' tasks and the channels'
//! timers, as no other task of the client runs there).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use redlatch::{Client, Error, Guard};
use tokio::runtime::Runtime;

use crate::common;

/// Generous: the machine may be loaded. An end this late is a wait never ended.
const PATIENCE: Duration = Duration::from_secs(10);

/// Room above a bounded wait on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_secs(1);

fn multi_thread(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// The waiting client and another that holds the locks it waits for.
fn clients(main: &Runtime, server: &testkit::RedisServer) -> (Client, Client) {
    main.block_on(async { (common::client(server).await, common::client(server).await) })
}

fn hold(main: &Runtime, holder: &Client, name: &str) -> Guard {
    main.block_on(async {
        holder
            .lock(name)
            .try_acquire()
            .await
            .unwrap()
            .expect("a free lock")
    })
}

/// Blocks until `runtime` runs at least `tasks` tasks (polled from outside:
/// a multi-thread runtime's workers run them meanwhile).
fn until_tasks(runtime: &Runtime, tasks: usize, what: &str) {
    let started = Instant::now();
    while runtime.metrics().num_alive_tasks() < tasks {
        assert!(started.elapsed() < PATIENCE, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Drives the current-thread runtime `idle`, where a waiter was spawned,
/// until that waiter parked: the channel's timer it starts runs on the
/// client's runtime (`main`, which had `before` tasks), never on the
/// waiter's own, which is then left idle with the waiter alone.
fn park_first_on_idle(idle: &Runtime, main: &Runtime, before: usize) {
    idle.block_on(async {
        let started = Instant::now();
        while main.metrics().num_alive_tasks() <= before {
            assert!(
                started.elapsed() < PATIENCE,
                "the first waiter never parked (no timer on the client's runtime)"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert_eq!(
        idle.metrics().num_alive_tasks(),
        1,
        "a timer on the waiter's own runtime"
    );
}

/// A bounded acquire on `runtime`: what it returned, and how long it took
/// (`None`: still waiting after [`PATIENCE`]).
fn bounded_acquire(
    runtime: &Runtime,
    client: &Client,
    name: &str,
    wait: Duration,
) -> Option<(Result<Guard, Error>, Duration)> {
    runtime.block_on(async {
        let started = Instant::now();
        let lock = client.lock(name);
        let outcome = tokio::time::timeout(PATIENCE, lock.acquire_within(Some(wait))).await;
        outcome.ok().map(|outcome| (outcome, started.elapsed()))
    })
}

/// A current-thread runtime runs its tasks only while something blocks on
/// it: a waiter spawned there and parked must not leave the channel's timer
/// on a runtime nobody drives (it did: the timer ran on the runtime of the
/// waiter that parked first). A waiter of another runtime on the same lock
/// must end its bounded wait on time (it parks with an earlier deadline
/// than the timer sleeps toward).
#[test]
fn a_bounded_wait_ends_though_the_first_waiter_s_runtime_is_idle() {
    const NAME: &str = "parked-idle-timer";
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let _held = hold(&main, &holder, NAME);

    let idle = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let waiter = client.clone();
    let before = main.metrics().num_alive_tasks();
    let _first = idle.spawn(async move { waiter.lock(NAME).acquire().await });
    park_first_on_idle(&idle, &main, before);

    let wait = Duration::from_millis(300);
    let outcome = bounded_acquire(&main, &client, NAME, wait);
    let (outcome, took) = outcome.expect("a 300 ms wait still waiting after 10 s");
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
    assert!(took < wait + MARGIN, "a 300 ms wait took {took:?}");
    drop(idle);
}

/// As above, with no bound on the wait: the holder's lease runs out with
/// no release message (a holder gone, its lease of 1 s not renewed), and a
/// waiter of a multi-thread runtime must take the lock at the lease end,
/// which only the channel's timer, on the idle runtime, would tell it.
#[test]
fn a_waiter_takes_an_expired_lock_though_the_first_waiter_s_runtime_is_idle() {
    const NAME: &str = "parked-idle-lease";
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    // A lease of its own: no watchdog renews it, no release is published.
    let held = main.block_on(async {
        let lock = holder.lock(NAME).with_lease(Duration::from_secs(1));
        lock.try_acquire().await.unwrap().expect("a free lock")
    });
    std::mem::forget(held);

    let idle = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let waiter = client.clone();
    let before = main.metrics().num_alive_tasks();
    let _first = idle.spawn(async move { waiter.lock(NAME).acquire().await });
    park_first_on_idle(&idle, &main, before);

    let taken = main.block_on(async {
        let lock = client.lock(NAME);
        tokio::time::timeout(PATIENCE, lock.acquire()).await
    });
    let guard = taken
        .expect("the lease ran out 1 s in; still waiting 10 s later")
        .unwrap();
    main.block_on(guard.release()).unwrap();
    drop(idle);
}

/// A cancelled waiter leaves no task behind: the channel's timer, started
/// for it, ends once no waiter with a deadline is left on the channel,
/// not at the deadline it slept toward (the holder's lease end, 30 s here;
/// an hour for a lock held with an hour's lease). Waiters on `LOCKS`
/// locks, each its own channel and timer, parked then aborted.
#[test]
fn cancelled_waiters_leave_no_timer_task_behind() {
    const LOCKS: usize = 100;
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let names: Vec<String> = (0..LOCKS).map(|i| format!("parked-cancel-{i}")).collect();
    let _held: Vec<Guard> = names.iter().map(|n| hold(&main, &holder, n)).collect();

    let before = main.metrics().num_alive_tasks();
    let waiters: Vec<_> = names
        .iter()
        .map(|name| {
            let client = client.clone();
            let name = name.clone();
            main.spawn(async move { client.lock(name).acquire().await })
        })
        .collect();
    // Each waiter's task and its channel's timer.
    until_tasks(&main, before + 2 * LOCKS, "the waiters never parked");
    for waiter in &waiters {
        waiter.abort();
    }
    main.block_on(async {
        for waiter in waiters {
            assert!(waiter.await.unwrap_err().is_cancelled());
        }
    });
    let left = main.block_on(common::settled(Duration::from_secs(3), || {
        let alive = main.metrics().num_alive_tasks();
        async move { i64::try_from(alive.saturating_sub(before)).unwrap() }
    }));
    // A little room for a connection task of the client started meanwhile.
    assert!(
        left <= 3,
        "{left} tasks left 3 s after {LOCKS} cancelled waits"
    );
}

/// The runtime of the waiter that parked first, for which the channel's
/// timer started, shuts down: a waiter of another runtime parked under that
/// timer (on the client's runtime) still ends its bounded wait on time, and
/// a later waiter takes the lock once it is released.
#[test]
fn a_waiter_of_another_runtime_outlives_the_first_waiter_s_runtime() {
    const NAME: &str = "parked-shutdown";
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let held = hold(&main, &holder, NAME);

    let first = multi_thread(1);
    let waiter = client.clone();
    let before = main.metrics().num_alive_tasks();
    let _first = first.spawn(async move { waiter.lock(NAME).acquire().await });
    // Parked: the channel's timer runs on the client's runtime.
    until_tasks(&main, before + 1, "the first waiter never parked");
    assert_eq!(
        first.metrics().num_alive_tasks(),
        1,
        "a timer on the waiter's runtime"
    );

    let second = multi_thread(1);
    let wait = Duration::from_millis(1500);
    let waiter = client.clone();
    let bounded = second.spawn(async move {
        let started = Instant::now();
        let outcome = waiter.lock(NAME).acquire_within(Some(wait)).await;
        (outcome.map(drop), started.elapsed())
    });
    // The bounded waiter's task, then a moment to park under the channel's
    // timer (started for the first waiter) before the first's runtime goes.
    until_tasks(&second, 1, "the bounded waiter never started");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        second.metrics().num_alive_tasks(),
        1,
        "a timer on the bounded waiter's runtime"
    );
    drop(first);

    let (outcome, took) = second
        .block_on(async { tokio::time::timeout(PATIENCE, bounded).await })
        .expect("the bounded wait outlived the first runtime's timer")
        .unwrap();
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
    assert!(took < wait + MARGIN, "a 1.5 s wait took {took:?}");

    let waiter = client.clone();
    let after = second.spawn(async move { waiter.lock(NAME).acquire().await });
    main.block_on(held.release()).unwrap();
    let taken = second
        .block_on(async { tokio::time::timeout(PATIENCE, after).await })
        .expect("a waiter never took the released lock")
        .unwrap();
    main.block_on(taken.unwrap().release()).unwrap();
}

/// What a kind of lock needs for the killed-subscription rounds: a hold
/// by the other client that keeps the waiters waiting, and a waiter's
/// acquire and release.
struct Kind {
    name: &'static str,
    hold: fn(Client) -> Pin<Box<dyn Future<Output = Held> + Send>>,
    take: fn(Client) -> Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// A hold: called, it gives the hold back.
type Held = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

fn held<F>(release: impl FnOnce() -> F + Send + 'static) -> Held
where
    F: Future<Output = ()> + Send + 'static,
{
    Box::new(move || Box::pin(release()))
}

const KINDS: [Kind; 5] = [
    Kind {
        name: "parked-kill-lock",
        hold: |c| {
            Box::pin(async move {
                let guard = c.lock("parked-kill-lock").try_acquire().await.unwrap();
                let guard = guard.expect("a free lock");
                held(move || async move { guard.release().await.unwrap() })
            })
        },
        take: |c| {
            Box::pin(async move {
                let guard = c.lock("parked-kill-lock").acquire().await.unwrap();
                guard.release().await.unwrap();
            })
        },
    },
    Kind {
        name: "parked-kill-fair",
        hold: |c| {
            Box::pin(async move {
                let guard = c.fair_lock("parked-kill-fair").try_acquire().await.unwrap();
                let guard = guard.expect("a free lock");
                held(move || async move { guard.release().await.unwrap() })
            })
        },
        take: |c| {
            Box::pin(async move {
                let guard = c.fair_lock("parked-kill-fair").acquire().await.unwrap();
                guard.release().await.unwrap();
            })
        },
    },
    Kind {
        name: "parked-kill-semaphore",
        hold: |c| {
            Box::pin(async move {
                let semaphore = c.semaphore("parked-kill-semaphore");
                semaphore.try_set_permits(1).await.unwrap();
                let permit = semaphore.try_acquire().await.unwrap();
                let permit = permit.expect("a free permit");
                held(move || async move {
                    permit.release().await.unwrap();
                })
            })
        },
        take: |c| {
            Box::pin(async move {
                let semaphore = c.semaphore("parked-kill-semaphore");
                let permit = semaphore.acquire().await.unwrap();
                permit.release().await.unwrap();
            })
        },
    },
    // The read-write lock's park is the broadcast one (boxed): writers
    // waiting for a writer, then readers waiting for a writer.
    Kind {
        name: "parked-kill-write",
        hold: |c| {
            Box::pin(async move {
                let lock = c.read_write_lock("parked-kill-write");
                let guard = lock.try_write().await.unwrap().expect("a free lock");
                held(move || async move { guard.release().await.unwrap() })
            })
        },
        take: |c| {
            Box::pin(async move {
                let lock = c.read_write_lock("parked-kill-write");
                let guard = lock.write().await.unwrap();
                guard.release().await.unwrap();
            })
        },
    },
    Kind {
        name: "parked-kill-read",
        hold: |c| {
            Box::pin(async move {
                let lock = c.read_write_lock("parked-kill-read");
                let guard = lock.try_write().await.unwrap().expect("a free lock");
                held(move || async move { guard.release().await.unwrap() })
            })
        },
        take: |c| {
            Box::pin(async move {
                let lock = c.read_write_lock("parked-kill-read");
                let guard = lock.read().await.unwrap();
                guard.release().await.unwrap();
            })
        },
    },
];

/// Channels some client of the server is subscribed to.
async fn subscribed_channels(admin: &mut redis::aio::MultiplexedConnection) -> usize {
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query_async(admin)
        .await
        .unwrap();
    channels.len()
}

/// The subscription connection killed while waiters park, and the lock
/// released at the same moment: the resubscription ends every parked
/// slot's park, the release's message goes to one of them; none is lost,
/// every waiter takes the lock in turn. Rounds per kind (lock, fair lock,
/// semaphore, read-write lock's writers and readers), to meet the race.
#[test]
fn every_waiter_takes_the_lock_through_a_killed_subscription() {
    const WAITERS: usize = 8;
    const ROUNDS: usize = 4;
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    main.block_on(async {
        let mut admin = common::admin(&server).await;
        for kind in &KINDS {
            for round in 0..ROUNDS {
                let held = (kind.hold)(holder.clone()).await;
                let taken = Arc::new(AtomicUsize::new(0));
                let waiters: Vec<_> = (0..WAITERS)
                    .map(|_| {
                        let (take, client, taken) = (kind.take, client.clone(), taken.clone());
                        tokio::spawn(async move {
                            take(client).await;
                            taken.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                let subscribed = common::eventually(PATIENCE, || {
                    let mut admin = admin.clone();
                    async move { subscribed_channels(&mut admin).await > 0 }
                })
                .await;
                assert!(subscribed, "{} round {round}: never subscribed", kind.name);
                // Odd rounds release first, even ones kill first.
                if round % 2 == 1 {
                    held().await;
                    common::kill_subscriptions(&mut admin).await;
                } else {
                    common::kill_subscriptions(&mut admin).await;
                    held().await;
                }
                let all = async {
                    for waiter in waiters {
                        waiter.await.unwrap();
                    }
                };
                let done = tokio::time::timeout(PATIENCE, all).await;
                assert!(
                    done.is_ok(),
                    "{} round {round}: {} of {WAITERS} waiters took it",
                    kind.name,
                    taken.load(Ordering::SeqCst)
                );
            }
        }
    });
}

/// Many bounded waits of different lengths on one held lock, started in
/// an order that keeps giving the channel's timer an earlier deadline than
/// the one it sleeps toward (re-armed while waiters leave): each ends
/// not acquired, not before its wait and within [`MARGIN`] after it.
#[test]
fn bounded_waits_of_many_lengths_each_end_on_time_under_one_timer() {
    const NAME: &str = "parked-rearm";
    const WAITERS: u64 = 120;
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let _held = hold(&main, &holder, NAME);
    main.block_on(async {
        let waits: Vec<_> = (0..WAITERS)
            .map(|i| {
                // Longest first, then ever shorter, with repeats (shared deadlines).
                let wait = Duration::from_millis(900 - (i / 2) * 6);
                let client = client.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let outcome = client.lock(NAME).acquire_within(Some(wait)).await;
                    (wait, outcome.map(drop), started.elapsed())
                })
            })
            .collect();
        for waiter in waits {
            let (wait, outcome, took) = tokio::time::timeout(PATIENCE, waiter)
                .await
                .expect("a bounded wait never ended")
                .unwrap();
            assert!(
                matches!(outcome, Err(Error::Timeout { .. })),
                "{wait:?}: {outcome:?}"
            );
            assert!(took >= wait, "a {wait:?} wait ended after {took:?}");
            assert!(took < wait + MARGIN, "a {wait:?} wait took {took:?}");
        }
    });
}

/// Waiters parked on a lock whose holder's lease (2 s, not renewed) runs
/// out with no release message, while the server is frozen (SIGSTOP) for
/// a second of it: each of them takes the lock in turn, woken by the
/// channel's timer at the lease end or by the one before it releasing.
/// A waiter whose call fails while the server is frozen asks again.
#[test]
fn waiters_take_an_expired_lock_after_the_server_was_frozen() {
    const NAME: &str = "parked-frozen";
    const WAITERS: usize = 6;
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let held = main.block_on(async {
        let lock = holder.lock(NAME).with_lease(Duration::from_secs(2));
        lock.try_acquire().await.unwrap().expect("a free lock")
    });
    std::mem::forget(held);
    main.block_on(async {
        let taken = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let (client, taken) = (client.clone(), taken.clone());
                tokio::spawn(async move {
                    let lock = client.lock(NAME);
                    loop {
                        if let Ok(guard) = lock.acquire().await {
                            taken.fetch_add(1, Ordering::SeqCst);
                            let _ = guard.release().await;
                            return;
                        }
                    }
                })
            })
            .collect();
        let admin = common::admin(&server).await;
        let subscribed = common::eventually(PATIENCE, || {
            let mut admin = admin.clone();
            async move { subscribed_channels(&mut admin).await > 0 }
        })
        .await;
        assert!(subscribed, "never subscribed");
        server.pause().unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        server.resume().unwrap();
        let all = async {
            for waiter in waiters {
                waiter.await.unwrap();
            }
        };
        let done = tokio::time::timeout(PATIENCE, all).await;
        assert!(
            done.is_ok(),
            "{} of {WAITERS} waiters took the lock",
            taken.load(Ordering::SeqCst)
        );
    });
}

/// 10,000 waits on one lock, each parked then dropped (polled once, as
/// the losing branch of a `select!` is): none leaves a task behind but
/// the channel's one timer, nor a subscription once its linger passed.
/// Behind a first waiter of the client, subscribed: each later acquire
/// joins its queue and parks at its first poll, with no call to Redis.
#[test]
fn ten_thousand_dropped_waits_on_one_lock_leave_nothing_behind() {
    const NAME: &str = "parked-many";
    const WAITS: usize = 10_000;
    let server = common::server();
    let main = multi_thread(2);
    let (client, holder) = clients(&main, &server);
    let _held = hold(&main, &holder, NAME);
    let first = {
        let client = client.clone();
        main.spawn(async move { client.lock(NAME).acquire().await })
    };
    main.block_on(async {
        let admin = common::admin(&server).await;
        let channel = "redisson_lock__channel:{parked-many}";
        let subscribed = common::eventually(PATIENCE, || {
            let mut admin = admin.clone();
            async move { common::subscribers(&mut admin, channel).await > 0 }
        })
        .await;
        assert!(subscribed, "the first waiter never subscribed");
    });
    let before = main.metrics().num_alive_tasks();
    main.block_on(async {
        let mut admin = common::admin(&server).await;
        let calls = common::script_calls(&mut admin).await;
        let lock = client.lock(NAME);
        let mut context = Context::from_waker(Waker::noop());
        for _ in 0..WAITS {
            let mut wait = std::pin::pin!(lock.acquire());
            assert!(wait.as_mut().poll(&mut context).is_pending());
        }
        // Parked in the queue, not cut off in a call (the first waiter's
        // own attempt may land meanwhile).
        let called = common::script_calls(&mut admin).await - calls;
        assert!(called <= 2, "{called} script calls for {WAITS} parks");
    });
    first.abort();
    let left = main.block_on(common::settled(Duration::from_secs(3), || {
        let alive = main.metrics().num_alive_tasks();
        async move { i64::try_from(alive.saturating_sub(before)).unwrap() }
    }));
    assert!(left <= 1, "{left} tasks more after {WAITS} dropped waits");
    main.block_on(async {
        let admin = common::admin(&server).await;
        let unsubscribed = common::eventually(PATIENCE, || {
            let mut admin = admin.clone();
            async move {
                common::subscribers(&mut admin, "redisson_lock__channel:{parked-many}").await == 0
            }
        })
        .await;
        assert!(unsubscribed, "still subscribed after every waiter left");
    });
}

//! The blocking facade, from plain threads.

mod common;
#[path = "blocking/handles.rs"]
mod handles;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::Commands;
use redlatch::blocking;

const THREADS: usize = 8;
const INCREMENTS: usize = 25;

fn connect(server: &testkit::RedisServer) -> blocking::Client {
    blocking::Client::builder(&server.url())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .connect()
        .expect("connect")
}

#[test]
fn eight_threads_increment_a_shared_counter_exactly_under_a_blocking_lock() {
    let server = common::server();
    // Two blocking clients (two runtimes), four threads each.
    let clients = [connect(&server), connect(&server)];
    let threads: Vec<_> = (0..THREADS)
        .map(|index| {
            let lock = clients[index % 2].lock("counter-lock");
            let mut data = server.conn();
            std::thread::spawn(move || {
                for _ in 0..INCREMENTS {
                    let guard = lock.acquire().expect("acquire");
                    // Read, pause, write: only the lock keeps the count exact.
                    let value: i64 = data.get("counter").unwrap_or(0);
                    std::thread::sleep(Duration::from_micros(200));
                    let () = data.set("counter", value + 1).expect("write");
                    guard.release().expect("release while held");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    let total: i64 = server.conn().get("counter").unwrap();
    assert_eq!(total, (THREADS * INCREMENTS) as i64);
}

#[test]
fn dropping_a_blocking_guard_releases_before_the_drop_returns() {
    let server = common::server();
    let first = connect(&server);
    let second = connect(&server);
    let guard = first.lock("handoff").acquire().unwrap();
    assert!(second.lock("handoff").try_acquire().unwrap().is_none());
    drop(guard);
    // No waiting: the release is done when drop returns.
    let taken = second.lock("handoff").try_acquire().unwrap();
    assert!(taken.is_some(), "the dropped guard's lock was still held");
}

#[test]
fn semaphore_permits_from_threads_never_exceed_the_count() {
    let server = common::server();
    let client = connect(&server);
    assert!(client.semaphore("pool").try_set_permits(2).unwrap());
    let in_use = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let pool = client.semaphore("pool");
            let (in_use, most) = (in_use.clone(), most.clone());
            std::thread::spawn(move || {
                for _ in 0..15 {
                    let permit = pool.acquire().expect("acquire");
                    most.fetch_max(in_use.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1));
                    in_use.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread");
    }
    assert!(most.load(Ordering::SeqCst) <= 2);
    assert_eq!(client.semaphore("pool").available_permits().unwrap(), 2);
}

/// Threads of two blocking clients await one latch; the count downs of
/// other threads open it for all of them, and a bounded await gives up.
#[test]
fn a_count_down_latch_opens_for_threads_of_two_clients() {
    let server = common::server();
    let clients = [connect(&server), connect(&server)];
    let latch = clients[0].count_down_latch("started");
    assert!(
        latch.await_within(Some(Duration::ZERO)).unwrap(),
        "open before it is set"
    );
    assert!(latch.try_set_count(4).unwrap());
    assert!(!latch.try_set_count(4).unwrap(), "set once");
    assert!(!latch.await_within(Some(Duration::from_millis(50))).unwrap());
    let awaiters: Vec<_> = (0..4)
        .map(|index| {
            // The generic path and the named method make one latch.
            let latch = clients[index % 2].handle::<redlatch::CountDownLatch>("started");
            std::thread::spawn(move || latch.await_zero())
        })
        .collect();
    let counters: Vec<_> = (0..4)
        .map(|index| {
            let latch = clients[(index + 1) % 2].count_down_latch("started");
            std::thread::spawn(move || latch.count_down())
        })
        .collect();
    let mut left: Vec<u64> = counters
        .into_iter()
        .map(|counter| counter.join().unwrap().expect("count_down"))
        .collect();
    left.sort_unstable();
    assert_eq!(left, [0, 1, 2, 3], "each count down took one");
    for awaiter in awaiters {
        awaiter.join().unwrap().expect("await_zero");
    }
    assert_eq!(latch.count().unwrap(), 0);
    assert!(!latch.delete().unwrap(), "deleted at zero already");
    assert_eq!(latch.name(), "started");
}

#[test]
fn permit_semaphore_and_multi_lock_work_from_a_thread() {
    let server = common::server();
    let client = connect(&server);
    let slots = client.permit_semaphore("slots");
    slots.try_set_permits(1).unwrap();
    let permit = slots.acquire().unwrap();
    assert!(permit.is_held());
    assert!(slots.try_acquire().unwrap().is_none());
    assert!(!permit.wait_lost(Duration::from_millis(50)));
    drop(permit);
    assert_eq!(slots.available_permits().unwrap(), 1);

    let other = connect(&server);
    let both = blocking::MultiLock::new([client.lock("y"), other.lock("x")]);
    let guard = std::thread::spawn(move || both.acquire_within(Some(Duration::from_secs(5))))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(guard.tokens().len(), 2);
    assert!(client.lock("x").try_acquire().unwrap().is_none());
    drop(guard);
    assert!(client.lock("x").try_acquire().unwrap().is_some());
}

#[test]
fn reentry_and_typed_errors_through_the_facade() {
    let server = common::server();
    let client = connect(&server);
    let lock = client.lock("re").with_owner("job-1");
    let outer = lock.acquire().unwrap();
    let inner = outer.reenter().unwrap();
    assert_eq!(outer.token(), inner.token());
    assert_eq!(lock.status().unwrap().holders[0].count, 2);
    drop(inner);
    outer.release().unwrap();
    assert!(matches!(
        client.lock("").acquire(),
        Err(redlatch::Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.semaphore("s").acquire_many(0),
        Err(redlatch::Error::InvalidPermits { .. })
    ));
    assert!(matches!(
        blocking::Client::connect("not a url"),
        Err(redlatch::Error::InvalidConfig(_))
    ));
}

#[tokio::test]
async fn calls_from_inside_an_async_runtime_do_not_panic() {
    let server = common::server();
    // Everything below blocks this runtime's only thread, and must still work:
    // the facade's own runtime does the work.
    let client = connect(&server);
    let guard = client.lock("in-async").acquire().unwrap();
    assert!(guard.is_held());
    drop(guard);
    let permit = client.semaphore("s").try_acquire().unwrap();
    assert!(permit.is_none());
    // Dropping the last handle shuts the facade's runtime down without blocking.
    drop(client);
}

#[test]
fn threads_take_a_blocking_fair_lock_in_the_order_they_queued() {
    let server = common::server();
    let client = connect(&server);
    let lock = client.fair_lock("fair-line");
    let holder = lock.clone().with_owner("holder").acquire().expect("free");
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for index in 0..3 {
        let waiter = lock.clone().with_owner(format!("waiter-{index}"));
        let order = order.clone();
        waiters.push(std::thread::spawn(move || {
            let guard = waiter
                .acquire_within(Some(Duration::from_secs(20)))
                .expect("turn");
            order.lock().unwrap().push(index);
            guard.release().expect("release");
        }));
        // The next thread queues only once this one is in line.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock.status().expect("status").line.len() < index + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "waiter {index} never queued"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    holder.release().expect("release");
    for waiter in waiters {
        waiter.join().expect("waiter thread");
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2], "turns follow the line");
    assert!(
        lock.try_acquire().expect("try").is_some(),
        "nothing left held"
    );
}

#[test]
fn blocking_read_write_lock_shares_reads_and_excludes_the_writer() {
    let server = common::server();
    let client = connect(&server);
    let lock = client.read_write_lock("rw-doc");
    let read = lock.clone().with_owner("reader-a").read().expect("read");
    let other = std::thread::spawn({
        let lock = lock.clone().with_owner("reader-b");
        move || lock.try_read().expect("try read").is_some()
    });
    assert!(other.join().unwrap(), "a second reader shares the lock");

    let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = std::thread::spawn({
        let lock = lock.clone().with_owner("writer");
        let wrote = wrote.clone();
        move || {
            let write = lock
                .write_within(Some(Duration::from_secs(20)))
                .expect("write");
            wrote.store(true, Ordering::SeqCst);
            // Downgrading keeps the lock (as a read) with no writer in between.
            let read = write.downgrade().expect("downgrade");
            let status = lock.status().expect("status");
            assert_eq!(status.mode, Some(redlatch::LockMode::Read));
            drop(read);
            lock.status().expect("status").held
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !wrote.load(Ordering::SeqCst),
        "the writer got in while a reader held"
    );
    drop(read);
    let still_held = writer.join().expect("writer thread");
    assert!(wrote.load(Ordering::SeqCst));
    assert!(
        !still_held,
        "dropping the last blocking guard released before returning"
    );
}

/// Red team: a blocking program that drops its client and ends (`main`
/// returns): the client's runtime is shut down in the background, so its
/// holder record must be gone by the time the drop returns, or the process
/// ends before the record's deletion is sent and leaves it for its TTL.
#[test]
fn a_dropped_blocking_client_has_taken_its_holder_record_when_the_drop_returns() {
    let server = common::server();
    let mut admin = server.conn();
    let client = connect(&server);
    let guard = client.lock("blocking-named").acquire().expect("free");
    // Named after about 50 ms.
    std::thread::sleep(Duration::from_millis(300));
    let named: Vec<String> = redis::cmd("KEYS")
        .arg("*redlatch_holder*")
        .query(&mut admin)
        .unwrap();
    assert_eq!(named.len(), 1, "the hold was never named");
    guard.release().expect("release");
    drop(client);
    // Right away: a program would end now.
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*redlatch_holder*")
        .query(&mut admin)
        .unwrap();
    assert!(
        left.is_empty(),
        "the record outlived the dropped client: {left:?}"
    );
}

/// The blocking rows of the deadline test (`trust::deadline` has the async
/// ones): each blocking acquire with a bound returns within its wait plus a
/// margin from a frozen server (SIGSTOP) or a slow one (the testkit's
/// proxy, latency past the wait), with an error naming the caller's wait,
/// and from a dead one, with a connection error. One thread per row, all
/// at once. (Before: a 500 ms wait took 3 to 24 s.)
#[test]
fn every_blocking_bounded_acquire_returns_within_its_wait_from_a_frozen_slow_or_dead_server() {
    use std::time::Instant;

    use redlatch::{Error, TimeLimit};

    type Row = (
        &'static str,
        fn(&blocking::Client, Duration) -> redlatch::Result<()>,
    );
    const ROWS: &[Row] = &[
        ("lock", |c, w| {
            c.lock("dl").acquire_within(Some(w)).map(drop)
        }),
        ("fair lock", |c, w| {
            c.fair_lock("dl-fair").acquire_within(Some(w)).map(drop)
        }),
        ("read", |c, w| {
            c.read_write_lock("dl-rw").read_within(Some(w)).map(drop)
        }),
        ("write", |c, w| {
            c.read_write_lock("dl-rw").write_within(Some(w)).map(drop)
        }),
        ("semaphore", |c, w| {
            c.semaphore("dl-sem").acquire_within(Some(w)).map(drop)
        }),
        ("permit semaphore", |c, w| {
            c.permit_semaphore("dl-permits")
                .acquire_within(Some(w))
                .map(drop)
        }),
        ("multi-lock", |c, w| {
            blocking::MultiLock::new([c.lock("dl-a"), c.lock("dl-b")])
                .acquire_within(Some(w))
                .map(drop)
        }),
    ];
    const WAIT: Duration = Duration::from_millis(500);
    const MARGIN: Duration = Duration::from_secs(1);
    for fault in ["frozen", "slow", "dead"] {
        let mut server = common::server();
        let proxy = testkit::Proxy::start(server.addr()).unwrap();
        let url = if fault == "slow" {
            proxy.url()
        } else {
            server.url()
        };
        // The default response timeout (3 s), longer than the wait.
        let client = blocking::Client::connect_with(
            redlatch::Client::builder(&url).connect_timeout(Duration::from_secs(2)),
        )
        .expect("connect");
        drop(client.lock("warm").acquire().expect("warm"));
        match fault {
            "frozen" => server.pause().unwrap(),
            "slow" => proxy.set_both(testkit::LinkFaults {
                latency: WAIT * 4,
                ..testkit::LinkFaults::default()
            }),
            _ => server.kill().unwrap(),
        }
        let rows: Vec<_> = ROWS
            .iter()
            .map(|&(name, acquire)| {
                let client = client.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let outcome = acquire(&client, WAIT);
                    (name, outcome, started.elapsed())
                })
            })
            .collect();
        let mut wrong = Vec::new();
        for row in rows {
            let (name, outcome, took) = row.join().unwrap();
            let fine = took <= WAIT + MARGIN
                && match &outcome {
                    Err(Error::ResponseTimeout { limit, .. }) if fault != "dead" => {
                        *limit == TimeLimit::Wait(WAIT)
                    }
                    Err(error) => fault == "dead" && error.is_transient(),
                    Ok(()) => false,
                };
            if !fine {
                wrong.push(format!("{name}: {outcome:?} after {took:?}"));
            }
        }
        if fault == "frozen" {
            server.resume().unwrap();
        }
        assert!(wrong.is_empty(), "{fault} server:\n{}", wrong.join("\n"));
    }
}

/// The facade has the async builder (same settings, a blocking `connect`)
/// and the async lock's acquires: a fixed lease on the handle, one attempt
/// with a lease, and `acquire()` waiting as the settings say.
#[test]
fn the_blocking_builder_and_lock_have_the_async_ones_calls() {
    let server = common::server();
    let mut settings = redlatch::Settings::default();
    settings.wait_timeout = Some(Duration::from_millis(100));
    let client = blocking::Client::builder(&server.url())
        .settings(settings)
        .key_prefix("b:")
        .lean()
        .connect()
        .expect("connect");
    assert_eq!(client.settings().key_prefix, "b:");

    let lease = Duration::from_secs(7);
    let leased = client.lock("fixed").with_lease(lease);
    let guard = leased.acquire().expect("acquire with the handle's lease");
    assert_eq!(guard.lease(), lease);
    drop(guard);

    let lock = client.lock("tried").with_lease(lease);
    let guard = lock.try_acquire().expect("try").expect("free");
    assert_eq!(guard.lease(), lease);
    assert!(lock.try_acquire().expect("try").is_none());
    // Held by another owner: the settings' 100 ms wait runs out.
    let other = client.lock("tried").with_owner("other");
    assert!(matches!(
        other.acquire(),
        Err(redlatch::Error::Timeout { .. })
    ));
    drop(guard);
    let guard = other.acquire().expect("free again");
    assert!(guard.is_held());
    assert!(client.capabilities().server.is_some());
    let listed = client.locks("tried").expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
}

#[test]
fn a_blocking_token_lock_acquires_reads_status_and_force_unlocks() {
    let server = common::server();
    let client = connect(&server);
    let lock = client.token_lock("blocking:token");
    assert_eq!(lock.name(), "blocking:token");
    let guard = lock.acquire().expect("acquire");
    assert!(guard.is_held());
    assert!(lock.try_acquire().expect("try").is_none(), "non-reentrant");
    let status = lock.status().expect("status");
    assert!(status.held);
    assert_eq!(status.holders[0].owner, guard.owner_token());
    assert!(lock.force_unlock().expect("force unlock"));
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::ForceUnlocked)
    );
    assert!(!lock.status().expect("status").held);

    let fenced = client.token_lock("blocking:fenced").fenced();
    let first = fenced.acquire().expect("fenced acquire");
    let token = first.fencing_token().expect("fenced");
    first.release().expect("release");
    let second = fenced
        .with_lease(Duration::from_secs(5))
        .acquire_within(Some(Duration::from_secs(1)))
        .expect("free again");
    assert!(second.fencing_token() > Some(token));
}

/// The one blocking handle has the one acquire shape on every kind: with
/// `holder` held on a fixed lease set on the handle, `rival` gets `None`
/// from `try_acquire`, the kind's "not now" from a zero wait, and the hold
/// from `acquire_within(None)` once that lease ran out unrenewed (the
/// holder's guard then knows it lost it).
fn blocking_shape<H, R>(kind: &str, holder: blocking::Handle<H>, rival: blocking::Handle<R>)
where
    H: redlatch::AcquireLock + Clone + Send + Sync + 'static,
    H::Guard: Send + 'static,
    R: redlatch::AcquireLock + Clone + Send + Sync + 'static,
    R::Guard: Send + 'static,
{
    let held = holder
        .with_lease(Duration::from_millis(500))
        .acquire()
        .expect(kind);
    assert!(rival.try_acquire().expect(kind).is_none(), "{kind}");
    assert!(
        matches!(
            rival.acquire_within(Some(Duration::ZERO)),
            Err(redlatch::Error::Timeout { .. } | redlatch::Error::NoPermits { .. })
        ),
        "{kind}: a zero wait is one attempt that finds it taken"
    );
    let taken = rival.acquire_within(None).expect(kind);
    assert!(
        held.wait_lost(Duration::from_secs(5)),
        "{kind}: the lease was renewed"
    );
    taken.release().expect(kind);
}

#[test]
fn every_blocking_lock_handle_has_the_one_acquire_shape() {
    let server = common::server();
    let (first, second) = (connect(&server), connect(&server));
    blocking_shape("Lock", first.lock("bs:plain"), second.lock("bs:plain"));
    blocking_shape(
        "SpinLock",
        first.spin_lock("bs:spin"),
        second.spin_lock("bs:spin"),
    );
    blocking_shape(
        "FairLock",
        first.fair_lock("bs:fair"),
        second.fair_lock("bs:fair"),
    );
    let (rw, other_rw) = (
        first.read_write_lock("bs:rw"),
        second.read_write_lock("bs:rw"),
    );
    blocking_shape("WriteSide", rw.writer(), other_rw.writer());
    blocking_shape("ReadSide", rw.writer(), other_rw.reader());
    first
        .permit_semaphore("bs:permits")
        .try_set_permits(1)
        .expect("permits");
    blocking_shape(
        "PermitSemaphore",
        first.permit_semaphore("bs:permits"),
        second.permit_semaphore("bs:permits"),
    );
}

//! Mutual exclusion under contention from several clients.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use redlatch::{AcquireLock, Fenced, HeldLock, Reenter};

const CLIENTS: usize = 3;
const TASKS_PER_CLIENT: usize = 16;
const SECTIONS_PER_TASK: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_read_sleep_write_keeps_exact_count_and_one_holder() {
    let server = common::server();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = common::client(&server).await;
        for _ in 0..TASKS_PER_CLIENT {
            let client = client.clone();
            let mut data = common::admin(&server).await;
            let inside = inside.clone();
            let overlaps = overlaps.clone();
            tasks.push(tokio::spawn(async move {
                let lock = client.lock("counter-lock");
                for _ in 0..SECTIONS_PER_TASK {
                    let guard = lock.acquire().await.expect("acquire");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Non-atomic read-modify-write: only the lock keeps it exact.
                    // A failed read must fail the test, not restart the count at 0.
                    let value: Option<i64> = data.get("counter").await.expect("read counter");
                    let value = value.unwrap_or(0);
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let () = data.set("counter", value + 1).await.expect("write counter");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release while held");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("worker task");
    }
    let mut data = common::admin(&server).await;
    let counter: i64 = data.get("counter").await.unwrap();
    assert_eq!(
        counter as usize,
        CLIENTS * TASKS_PER_CLIENT * SECTIONS_PER_TASK
    );
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
}

#[tokio::test]
async fn second_acquire_waits_until_first_guard_releases() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("handoff");
    let first = lock.acquire().await.unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "held lock taken twice"
    );

    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.map(|guard| guard.token()) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "waiter got the lock while it was held"
    );
    let first_token = first.token();
    first.release().await.unwrap();
    let second_token = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("waiter woken by the release")
        .unwrap()
        .unwrap();
    assert!(second_token > first_token);
}

/// PUBLISH commands the server has run, scripts' own included.
async fn publishes(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    common::command_calls(admin, &["publish"]).await
}

/// How long a waiter may take to be woken by a release; leases are 30 s,
/// so only the unlock message can wake it this soon.
const WOKEN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_publishes_only_when_a_waiter_marked_the_hold() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let holder = common::client(&server).await;
    let waiting = common::client(&server).await;

    // Nobody waits: the release deletes the lock and publishes nothing.
    let before = publishes(&mut admin).await;
    let guard = holder.lock("quiet").acquire().await.unwrap();
    guard.release().await.unwrap();
    assert_eq!(
        publishes(&mut admin).await,
        before,
        "a release nobody waited for published"
    );

    // A waiter in another client marks the hold it found; the release wakes it.
    let guard = holder.lock("marked").acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = waiting.lock("marked");
        async move { lock.acquire().await }
    });
    let marked = common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        async move {
            let mark: Option<String> = admin.hget("marked", "redlatch_waiters").await.unwrap();
            mark.is_some()
        }
    })
    .await;
    assert!(marked, "the waiter did not mark the hold");
    let before = publishes(&mut admin).await;
    guard.release().await.unwrap();
    let taken = tokio::time::timeout(WOKEN, waiter)
        .await
        .expect("the waiter woken by the release, not its lease end")
        .unwrap()
        .unwrap();
    assert_eq!(publishes(&mut admin).await, before + 1);
    // The mark is no holder: the lock's status lists the new holder alone.
    let status = waiting.lock("marked").status().await.unwrap();
    assert_eq!(status.holders.len(), 1, "{status:?}");
    taken.release().await.unwrap();
}

/// The waiter's subscription connection is killed (`CLIENT KILL TYPE
/// pubsub`) between its mark and the release, a little later each round:
/// the unlock message may be lost, yet the waiter takes the lock well
/// before the marked hold's lease (30 s) would have ended, and no mark is
/// left once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_release_whose_message_is_lost_with_the_subscriber_still_wakes_the_waiter() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let holder = common::client(&server).await;
    let waiting = common::client(&server).await;
    for round in 0..8u64 {
        let guard = holder.lock("mark-killed").acquire().await.unwrap();
        let waiter = tokio::spawn({
            let lock = waiting.lock("mark-killed");
            async move { lock.acquire().await }
        });
        let marked = common::eventually(WOKEN, || {
            let mut admin = admin.clone();
            async move {
                let mark: Option<String> =
                    admin.hget("mark-killed", "redlatch_waiters").await.unwrap();
                mark.is_some()
            }
        })
        .await;
        assert!(marked, "round {round}: the waiter did not mark the hold");
        let kill = async {
            tokio::time::sleep(Duration::from_micros(round * 500)).await;
            common::kill_subscriptions(&mut admin.clone()).await;
        };
        let (released, ()) = tokio::join!(guard.release(), kill);
        released.unwrap();
        let taken = tokio::time::timeout(WOKEN, waiter)
            .await
            .unwrap_or_else(|_| panic!("round {round}: the waiter slept towards the lease end"))
            .unwrap()
            .unwrap();
        taken.release().await.unwrap();
        let left: bool = admin.exists("mark-killed").await.unwrap();
        assert!(
            !left,
            "round {round}: the lock (or its mark) outlived its holds"
        );
    }
}

/// Waiters of one client queue behind the first of them (only that one
/// asked Redis, and marked the hold it found). When the first takes the
/// lock and releases it, nobody marked that hold: the client's own release
/// publishes all the same, since it has waiters on the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_queued_in_the_holders_client_are_woken_by_its_release() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiting = common::client(&server).await;
    let guard = holder.lock("queued").acquire().await.unwrap();
    let (taken_tx, mut taken_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for n in 0..3 {
        let lock = waiting.lock("queued");
        let taken_tx = taken_tx.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            taken_tx.send(n).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    guard.release().await.unwrap();
    for _ in 0..3 {
        tokio::time::timeout(WOKEN, taken_rx.recv())
            .await
            .expect("each queued waiter woken by the release before it, not a lease end")
            .unwrap();
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unlock_wakes_one_waiter_not_all() {
    const WAITERS: usize = 10;
    let server = common::server();
    let holder = common::client(&server).await;
    let waiting = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let guard = holder.lock("herd").acquire().await.unwrap();
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let lock = waiting.lock("herd");
        let acquired = acquired.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            acquired.fetch_add(1, Ordering::SeqCst);
            // Keep it: the other waiters must stay parked, not retry.
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(guard);
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // all parked
    let before = common::script_calls(&mut admin).await;
    guard.release().await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let acquired = acquired.clone();
            async move { acquired.load(Ordering::SeqCst) == 1 }
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = common::script_calls(&mut admin).await - before;
    // The release, the woken waiter's attempt, and a little slack; a stampede
    // would be one attempt per waiter (10+).
    assert!(
        calls <= 4,
        "{calls} script calls after one unlock with {WAITERS} waiters"
    );
    assert_eq!(acquired.load(Ordering::SeqCst), 1);
    for task in tasks {
        task.abort();
    }
}

/// Concurrent acquires and releases of one client leave together in a few
/// script calls (coalesced), each lock with its own outcome: 256 distinct
/// locks taken at once are all granted, each with its own counter's first
/// token, a lock held
/// elsewhere and a key of the wrong type in the same batches get their own
/// answers, and every release frees its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_share_script_calls_and_keep_their_own_outcomes() {
    const LOCKS: usize = 256;
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let () = admin.set("batch:odd", "a string").await.unwrap();
    let held = other.lock("batch:held").acquire().await.unwrap();

    let before = common::script_calls(&mut admin).await;
    let names: Vec<String> = (0..LOCKS).map(|i| format!("batch:{i}")).collect();
    let acquires = names.iter().map(|name| {
        let lock = client.lock(name.as_str());
        async move { lock.try_acquire().await }
    });
    let busy = client.lock("batch:held");
    let odd = client.lock("batch:odd");
    let (guards, busy, odd) = tokio::join!(
        futures_util::future::join_all(acquires),
        busy.try_acquire(),
        odd.try_acquire(),
    );
    let calls = common::script_calls(&mut admin).await - before;
    let guards: Vec<_> = guards
        .into_iter()
        .map(|outcome| outcome.expect("no error").expect("a free lock is granted"))
        .collect();
    assert!(
        busy.unwrap().is_none(),
        "the lock held elsewhere is refused"
    );
    assert!(
        matches!(odd, Err(redlatch::Error::WrongType { .. })),
        "the string key is refused on its own: {odd:?}"
    );
    let tokens: std::collections::BTreeSet<u64> = guards.iter().map(|g| g.token()).collect();
    assert_eq!(
        tokens.len(),
        guards.len(),
        "each acquire of the batch took its own token from the shared counter"
    );
    assert!(
        calls < (LOCKS as u64) / 2,
        "{calls} script calls for {} acquires: not coalesced",
        LOCKS + 2
    );

    let before = common::script_calls(&mut admin).await;
    let releases = guards.into_iter().map(|guard| guard.release());
    for outcome in futures_util::future::join_all(releases).await {
        outcome.expect("released");
    }
    let calls = common::script_calls(&mut admin).await - before;
    assert!(
        calls < (LOCKS as u64) / 2,
        "{calls} script calls for {LOCKS} releases"
    );
    for name in &names {
        let exists: bool = admin.exists(name).await.unwrap();
        assert!(!exists, "{name} still held");
    }
    held.release().await.unwrap();
}

/// Holders that take the lock through the library's traits, each through a
/// handle of its own: one generic section for every kind of lock.
const TRAIT_HOLDERS: usize = 4;
const TRAIT_SECTIONS: usize = 12;

/// Runs `TRAIT_SECTIONS` sections on each of `handles` at once, written once
/// over [`AcquireLock`], [`HeldLock`], [`Fenced`] and [`Reenter`]: the three
/// acquires in turn, one holder at a time, a re-entry under the same token,
/// then the release. Returns the tokens in the order the lock was held.
async fn sections_over_the_traits<L>(handles: Vec<L>) -> Vec<u64>
where
    L: AcquireLock + Send + Sync + 'static,
    L::Guard: Fenced + Reenter + Send + Sync + 'static,
{
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (holder, lock) in handles.into_iter().enumerate() {
        let (inside, tokens) = (inside.clone(), tokens.clone());
        tasks.push(tokio::spawn(async move {
            for section in 0..TRAIT_SECTIONS {
                let guard = match (holder + section) % 3 {
                    0 => lock.acquire().await.expect("acquire"),
                    1 => lock
                        .acquire_within(Some(Duration::from_secs(20)))
                        .await
                        .expect("acquire_within"),
                    _ => loop {
                        if let Some(guard) = lock.try_acquire().await.expect("try_acquire") {
                            break guard;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    },
                };
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders of {} at once",
                    lock.name()
                );
                assert_eq!(guard.name(), lock.name());
                assert!(guard.is_held() && guard.lost_reason().is_none());
                tokens.lock().push(guard.token());

                let again = guard.reenter().await.expect("reenter");
                assert_eq!(again.token(), guard.token(), "a re-entry keeps the token");
                again.release().await.expect("release the re-entry");
                assert!(guard.is_held(), "the first hold outlives its re-entry");
                tokio::time::sleep(Duration::from_millis(1)).await;

                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("holder task");
    }
    tokens.lock().clone()
}

/// The tokens of `sections_over_the_traits`: one per section, strictly
/// increasing in the order the lock was held; then the lock is free.
async fn assert_sections<L>(kind: &str, probe: &L, tokens: &[u64])
where
    L: AcquireLock,
    L::Guard: Fenced,
{
    assert_eq!(tokens.len(), TRAIT_HOLDERS * TRAIT_SECTIONS, "{kind}");
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{kind}: tokens not strictly increasing in holding order: {tokens:?}"
    );
    let after = probe
        .try_acquire()
        .await
        .expect("try_acquire")
        .unwrap_or_else(|| panic!("{kind}: the lock is still held after every release"));
    assert!(after.token() > tokens[tokens.len() - 1], "{kind}");
    after.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_generic_section_excludes_and_fences_on_every_kind_of_lock() {
    let masters = common::masters(3);
    let urls = masters.urls();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(common::client_at(&urls[0], Duration::from_secs(5)).await);
    }
    let client = |holder: usize| &clients[holder % clients.len()];

    let locks: Vec<_> = (0..TRAIT_HOLDERS)
        .map(|holder| client(holder).lock("vocabulary:plain"))
        .collect();
    let tokens = sections_over_the_traits(locks).await;
    assert_sections("Lock", &client(0).lock("vocabulary:plain"), &tokens).await;

    let fair: Vec<_> = (0..TRAIT_HOLDERS)
        .map(|holder| client(holder).fair_lock("vocabulary:fair"))
        .collect();
    let tokens = sections_over_the_traits(fair).await;
    assert_sections("FairLock", &client(0).fair_lock("vocabulary:fair"), &tokens).await;

    let spin: Vec<_> = (0..TRAIT_HOLDERS)
        .map(|holder| client(holder).spin_lock("vocabulary:spin"))
        .collect();
    let tokens = sections_over_the_traits(spin).await;
    assert_sections("SpinLock", &client(0).spin_lock("vocabulary:spin"), &tokens).await;

    let writers: Vec<_> = (0..TRAIT_HOLDERS)
        .map(|holder| client(holder).read_write_lock("vocabulary:rw").writer())
        .collect();
    let tokens = sections_over_the_traits(writers).await;
    assert_sections(
        "WriteSide",
        &client(0).read_write_lock("vocabulary:rw").writer(),
        &tokens,
    )
    .await;

    let mut redlocks = Vec::new();
    for _ in 0..2 {
        redlocks.push(redlatch::Redlock::connect(&urls).await.expect("redlock"));
    }
    let redlock_locks: Vec<_> = (0..TRAIT_HOLDERS)
        .map(|holder| redlocks[holder % redlocks.len()].lock("vocabulary:redlock"))
        .collect();
    let tokens = sections_over_the_traits(redlock_locks).await;
    assert_sections(
        "RedlockLock",
        &redlocks[0].lock("vocabulary:redlock"),
        &tokens,
    )
    .await;
}

/// Sets the wait timeout of `clients` (what `acquire()` waits for).
fn wait_timeout(clients: &[redlatch::Client], wait: Option<Duration>) {
    for client in clients {
        let mut settings = client.settings();
        settings.wait_timeout = wait;
        client.update_settings(settings).expect("settings");
    }
}

/// A wait that ran out: the lock's "not now" (`Timeout`), or a permit's (`NoPermits`).
fn not_now<G>(outcome: &redlatch::Result<G>) -> bool {
    matches!(
        outcome,
        Err(redlatch::Error::Timeout { .. } | redlatch::Error::NoPermits { .. })
    )
}

/// The one acquire shape, written once over [`AcquireLock`] and checked the
/// same on every kind: `holder` takes it on a fixed lease set on the handle
/// (`with_lease`); then `rival` finds it taken by `try_acquire` (`None`),
/// by `acquire_within(Some(ZERO))` (one attempt: the kind's "not now"
/// error), by a short bounded wait, and by `acquire()` under the clients'
/// 50 ms `wait_timeout` (the same error); `acquire_within(None)` waits
/// whatever that setting says, and gets it once the holder's lease ran out
/// unrenewed (the holder's guard then reports it lost).
async fn the_acquire_shape<H, R>(kind: &str, holder: H, rival: R, clients: &[redlatch::Client])
where
    H: AcquireLock,
    R: AcquireLock,
{
    let lease = Duration::from_millis(700);
    let held = holder.with_lease(lease).acquire().await.expect(kind);
    assert!(held.is_held(), "{kind}");
    assert!(
        rival.try_acquire().await.expect(kind).is_none(),
        "{kind}: try_acquire beside a holder"
    );
    let zero = rival.acquire_within(Some(Duration::ZERO)).await;
    assert!(
        not_now(&zero),
        "{kind}: a zero wait is one attempt that finds it taken"
    );
    let bounded = rival.acquire_within(Some(Duration::from_millis(50))).await;
    assert!(not_now(&bounded), "{kind}: a bounded wait runs out");
    wait_timeout(clients, Some(Duration::from_millis(50)));
    let by_default = rival.acquire().await;
    assert!(
        not_now(&by_default),
        "{kind}: acquire() waits as wait_timeout says"
    );
    // `None` waits for ever, whatever the settings say: until the holder's
    // fixed lease runs out, since nothing renews it.
    let taken = tokio::time::timeout(Duration::from_secs(30), rival.acquire_within(None))
        .await
        .unwrap_or_else(|_| panic!("{kind}: the holder's lease was renewed"))
        .expect(kind);
    wait_timeout(clients, None);
    assert!(
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .is_ok(),
        "{kind}: the fixed lease ran out, and the holder's guard knows"
    );
    assert!(!held.is_held(), "{kind}");
    taken.release().await.expect(kind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_acquire_shape_behaves_the_same_on_every_kind() {
    let masters = common::masters(3);
    let urls = masters.urls();
    let (first, second) = (
        common::client_at(&urls[0], Duration::from_secs(5)).await,
        common::client_at(&urls[0], Duration::from_secs(5)).await,
    );
    let clients = [first.clone(), second.clone()];
    the_acquire_shape(
        "Lock",
        first.lock("shape:plain"),
        second.lock("shape:plain"),
        &clients,
    )
    .await;
    the_acquire_shape(
        "FairLock",
        first.fair_lock("shape:fair"),
        second.fair_lock("shape:fair"),
        &clients,
    )
    .await;
    the_acquire_shape(
        "SpinLock",
        first.spin_lock("shape:spin"),
        second.spin_lock("shape:spin"),
        &clients,
    )
    .await;
    the_acquire_shape(
        "WriteSide",
        first.read_write_lock("shape:rw").writer(),
        second.read_write_lock("shape:rw").writer(),
        &clients,
    )
    .await;
    the_acquire_shape(
        "ReadSide",
        first.read_write_lock("shape:rw").writer(),
        second.read_write_lock("shape:rw").reader(),
        &clients,
    )
    .await;
    first
        .permit_semaphore("shape:permits")
        .try_set_permits(1)
        .await
        .expect("permits");
    the_acquire_shape(
        "PermitSemaphore",
        first.permit_semaphore("shape:permits"),
        second.permit_semaphore("shape:permits"),
        &clients,
    )
    .await;

    let redlocks = [
        redlatch::Redlock::connect(&urls).await.expect("redlock"),
        redlatch::Redlock::connect(&urls).await.expect("redlock"),
    ];
    let redlock_clients: Vec<_> = redlocks
        .iter()
        .flat_map(redlatch::Redlock::clients)
        .collect();
    the_acquire_shape(
        "RedlockLock",
        redlocks[0].lock("shape:redlock"),
        redlocks[1].lock("shape:redlock"),
        &redlock_clients,
    )
    .await;
}

/// Readers share, written once over [`AcquireLock`]: two readers hold at
/// once; a writer neither enters beside them nor lets a new reader in while
/// it waits; it gets in once both readers are gone, with a later token, and
/// then no reader enters beside it.
async fn readers_share_while_a_writer_waits<R, W>(first: R, second: R, writer: W)
where
    R: AcquireLock,
    R::Guard: Fenced,
    W: AcquireLock + Send + Sync + 'static,
    W::Guard: Fenced + Send + 'static,
{
    let one = first.acquire().await.expect("first reader");
    let two = second
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .expect("a second reader enters beside the first");
    assert!(one.is_held() && two.is_held());
    assert!(
        writer.try_acquire().await.expect("try").is_none(),
        "a writer entered beside readers"
    );

    let writer = Arc::new(writer);
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move { writer.acquire_within(Some(Duration::from_secs(20))).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "the writer did not wait for the readers"
    );
    assert!(
        first.try_acquire().await.expect("try").is_none(),
        "a new reader entered ahead of a waiting writer"
    );

    let last_read = one.token().max(two.token());
    one.release().await.expect("release the first reader");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "the writer entered beside a reader");
    two.release().await.expect("release the second reader");
    let written = waiting
        .await
        .expect("writer task")
        .expect("the writer got in once the readers left");
    assert!(written.token() > last_read);
    assert!(
        second.try_acquire().await.expect("try").is_none(),
        "a reader entered beside the writer"
    );
    written.release().await.expect("release the writer");
    let after = first
        .try_acquire()
        .await
        .expect("try")
        .expect("the lock is free after every release");
    after.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_read_sides_share_the_lock_and_a_write_side_waits_for_both() {
    let server = common::server();
    let first = common::client_at(&server.url(), Duration::from_secs(5)).await;
    let second = common::client_at(&server.url(), Duration::from_secs(5)).await;
    let name = "vocabulary:readers";
    readers_share_while_a_writer_waits(
        first.read_write_lock(name).reader(),
        second.read_write_lock(name).reader(),
        second.read_write_lock(name).writer(),
    )
    .await;
}

/// A spin lock is the reentrant lock without pub/sub: the two exclude each
/// other on one name, and a spinning waiter gets the lock once a `Lock`
/// holder lets go (it polls: no unlock message is needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spin_lock_and_a_lock_of_one_name_exclude_each_other() {
    let server = common::server();
    let first = common::client_at(&server.url(), Duration::from_secs(5)).await;
    let second = common::client_at(&server.url(), Duration::from_secs(5)).await;
    let held = first.lock("shared:name").acquire().await.expect("lock");
    let spin = second.spin_lock("shared:name");
    assert!(
        spin.try_acquire().await.expect("try").is_none(),
        "a spin lock entered a held Lock"
    );
    let waiting =
        tokio::spawn(async move { spin.acquire_within(Some(Duration::from_secs(10))).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "the spinning waiter did not wait");
    let token = held.token();
    held.release().await.expect("release");
    let spun = waiting
        .await
        .expect("task")
        .expect("the spinning waiter got the lock");
    assert!(spun.token() > token);
    assert!(
        first
            .lock("shared:name")
            .try_acquire()
            .await
            .expect("try")
            .is_none(),
        "a Lock entered a held spin lock"
    );
    spun.release().await.expect("release");
}

#[path = "mutual_exclusion/token_lock.rs"]
mod token_lock;

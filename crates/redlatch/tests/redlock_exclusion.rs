//! Concurrent Redlock clients on five masters: never two holders at once,
//! and fencing tokens strictly increasing in the order the lock was held,
//! also when a master restarts empty (its counter back at zero) mid-run.

mod redlock_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redlatch::Error;
use redlock_common::{masters, redlock};

const CLIENTS: usize = 3;
const TASKS_PER_CLIENT: usize = 2;
const LEASE: Duration = Duration::from_secs(1);

/// What the workers record inside the critical section.
#[derive(Default)]
struct Record {
    inside: AtomicUsize,
    overlaps: AtomicUsize,
    acquisitions: AtomicUsize,
    /// Workers stop once `acquisitions` reaches it.
    target: AtomicUsize,
    /// Tokens in the order the lock was held.
    tokens: Mutex<Vec<u64>>,
}

/// Starts the workers: each loops acquire → record → release until
/// `record.target` acquisitions are recorded in all.
async fn start_workers(
    masters: &testkit::Servers,
    name: &'static str,
    target: usize,
    record: Arc<Record>,
) -> Vec<tokio::task::JoinHandle<()>> {
    record.target.store(target, Ordering::SeqCst);
    let mut workers = Vec::new();
    for _ in 0..CLIENTS {
        let redlock = redlock(masters, LEASE).await;
        for _ in 0..TASKS_PER_CLIENT {
            let lock = redlock.lock(name);
            let record = record.clone();
            workers.push(tokio::spawn(async move {
                while record.acquisitions.load(Ordering::SeqCst)
                    < record.target.load(Ordering::SeqCst)
                {
                    let guard = lock
                        .acquire_within(Some(Duration::from_secs(20)))
                        .await
                        .expect("acquire under contention");
                    if record.inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        record.overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    record.tokens.lock().push(guard.token());
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    record.acquisitions.fetch_add(1, Ordering::SeqCst);
                    record.inside.fetch_sub(1, Ordering::SeqCst);
                    match guard.release().await {
                        Ok(()) => {}
                        // A master died holding part of it: the rest expires with the lease.
                        Err(Error::QuorumFailed { .. }) => {}
                        Err(other) => panic!("release: {other}"),
                    }
                }
            }));
        }
    }
    workers
}

fn assert_exclusive_and_increasing(record: &Record) {
    assert_eq!(
        record.overlaps.load(Ordering::SeqCst),
        0,
        "two holders at once"
    );
    let tokens = record.tokens.lock();
    for pair in tokens.windows(2) {
        assert!(pair[0] < pair[1], "tokens not increasing: {tokens:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_keep_mutual_exclusion_and_increasing_tokens() {
    let masters = masters(5);
    let record = Arc::new(Record::default());
    let workers = start_workers(&masters, "rl:contended", 40, record.clone()).await;
    for worker in workers {
        worker.await.expect("worker");
    }
    assert!(record.tokens.lock().len() >= 40);
    assert_exclusive_and_increasing(&record);
}

/// A master that loses its data may come back empty only after the longest
/// lease has run out ("delayed restart", `docs/REDLOCK.md`): until then a
/// hold that had a bare majority including it would be down to a minority.
/// Its fencing counter restarts at zero all the same, and tokens must keep
/// increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_increasing_when_a_master_restarts_empty() {
    let mut masters = masters(5);
    let record = Arc::new(Record::default());
    let workers = start_workers(&masters, "rl:restart", usize::MAX, record.clone()).await;
    while record.acquisitions.load(Ordering::SeqCst) < 15 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Master 0 crashes, losing its data (its fencing counter included), and
    // comes back empty after the lease; the others carry on meanwhile.
    tokio::task::block_in_place(|| masters[0].kill()).expect("kill master 0");
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    tokio::task::block_in_place(|| masters[0].restart()).expect("restart master 0");
    let restarted_at = record.tokens.lock().len();
    while record.acquisitions.load(Ordering::SeqCst) < restarted_at + 15 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    record.target.store(0, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("worker");
    }
    let tokens = record.tokens.lock().clone();
    assert!(
        tokens.len() >= restarted_at + 15,
        "acquisitions after the restart"
    );
    assert_exclusive_and_increasing(&record);
    // The restarted master's counter was raised back to the others'.
    let mut conn = redlock_common::admin(&masters[0]).await;
    let counter: Option<u64> = redis::cmd("GET")
        .arg("redlatch_lock_token")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        counter.is_some_and(|counter| counter > restarted_at as u64),
        "counter {counter:?}"
    );
}

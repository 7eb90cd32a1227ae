//! Handles made by `blocking::Client::handle::<P>`: they outlive their
//! client, answer from many threads and from inside an async runtime, and
//! a guard dropped on another thread after its client and handle still
//! gives its hold back.

use std::time::Duration;

use redlatch::{CountDownLatch, FairLock, ReadWriteLock, Semaphore, TokenLock};

use super::{THREADS, connect};
use crate::common;

#[test]
fn a_handle_outlives_its_client_and_counts_down_exactly_from_many_threads() {
    let server = common::server();
    let latch = {
        let client = connect(&server);
        client.handle::<CountDownLatch>("many-threads")
    };
    // The client is gone: its runtime lives on in the handle.
    let per_thread = 25u64;
    assert!(latch.try_set_count(THREADS as u64 * per_thread).unwrap());
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let latch = latch.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    latch.count_down().expect("count down");
                }
            })
        })
        .collect();
    assert!(
        latch.await_within(Some(Duration::from_secs(30))).unwrap(),
        "not open after every count down"
    );
    for thread in threads {
        thread.join().expect("thread");
    }
    assert_eq!(latch.count().unwrap(), 0);
    assert_eq!(latch.name(), "many-threads");
}

/// Every primitive `handle::<P>` makes has its blocking calls: the
/// semaphore's and the read-write lock's handles had none (`E0599`) while
/// their blocking calls sat on wrapper types of their own.
#[test]
fn every_blocking_handle_made_by_handle_has_its_calls() {
    let server = common::server();
    let client = connect(&server);
    let pool = client.handle::<Semaphore>("handle-pool");
    assert_eq!(pool.name(), "handle-pool");
    assert!(pool.try_set_permits(2).unwrap());
    let permit = pool.acquire().unwrap();
    assert_eq!(
        client.semaphore("handle-pool").available_permits().unwrap(),
        1
    );
    permit.release().unwrap();
    let prices = client.handle::<ReadWriteLock>("handle-prices");
    assert_eq!(prices.name(), "handle-prices");
    let read = prices.read().unwrap();
    assert!(
        client
            .read_write_lock("handle-prices")
            .try_write()
            .unwrap()
            .is_none()
    );
    read.release().unwrap();
    prices.write().unwrap().release().unwrap();
}

#[test]
fn a_blocking_handle_answers_inside_an_async_runtime() {
    let server = common::server();
    let client = connect(&server);
    let latch = client.handle::<CountDownLatch>("inside");
    assert!(latch.try_set_count(2).unwrap());
    for runtime in [
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    ] {
        let latch = latch.clone();
        let left = runtime.block_on(async move { latch.count_down() });
        assert!(left.is_ok(), "{left:?}");
    }
    assert_eq!(latch.count().unwrap(), 0);
    // The last handle dropped inside a runtime: no panic, no hang.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        drop(client);
        drop(latch);
    });
}

#[test]
fn a_guard_dropped_on_another_thread_after_its_client_and_handle_gives_its_hold_back() {
    let server = common::server();
    let other = connect(&server);
    let (fair, token) = {
        let client = connect(&server);
        let fair = client.handle::<FairLock>("fair-orphan").acquire().unwrap();
        let token = client
            .handle::<TokenLock>("token-orphan")
            .acquire()
            .unwrap();
        (fair, token)
    };
    assert!(
        other
            .fair_lock("fair-orphan")
            .try_acquire()
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .token_lock("token-orphan")
            .try_acquire()
            .unwrap()
            .is_none()
    );
    std::thread::spawn(move || {
        drop(fair);
        drop(token);
    })
    .join()
    .expect("drop thread");
    // The blocking guard's drop releases before it returns.
    assert!(
        other
            .fair_lock("fair-orphan")
            .try_acquire()
            .unwrap()
            .is_some()
    );
    assert!(
        other
            .token_lock("token-orphan")
            .try_acquire()
            .unwrap()
            .is_some()
    );
}

#[test]
fn a_blocking_guard_dropped_inside_an_async_runtime_releases_before_the_drop_returns() {
    let server = common::server();
    let client = connect(&server);
    let other = connect(&server);
    for flavor in ["current thread", "multi thread"] {
        let runtime = if flavor == "current thread" {
            tokio::runtime::Builder::new_current_thread()
        } else {
            tokio::runtime::Builder::new_multi_thread()
        }
        .enable_all()
        .build()
        .unwrap();
        let fair = client
            .handle::<FairLock>("dropped-in-async")
            .acquire()
            .unwrap();
        let token = client
            .handle::<TokenLock>("token-dropped-in-async")
            .acquire()
            .unwrap();
        runtime.block_on(async move {
            drop(fair);
            drop(token);
        });
        let fair = other.fair_lock("dropped-in-async").try_acquire().unwrap();
        let token = other
            .token_lock("token-dropped-in-async")
            .try_acquire()
            .unwrap();
        assert!(fair.is_some() && token.is_some(), "{flavor}: not released");
    }
}

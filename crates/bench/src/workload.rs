//! What the tasks of one process do during a measurement window, and what
//! they record. Worker processes run the same code and send the logs back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::{now_ns, sleep_until_ns};
use crate::contender::Locker;

/// Distinct error messages kept per log; the rest are only counted.
const MAX_ERROR_KINDS: usize = 10;
/// Pause after an error, so a broken server does not become a busy loop.
const ERROR_BACKOFF_NS: u64 = 5_000_000;

/// Errors seen by the tasks: a count and the first few messages.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Errors {
    pub count: u64,
    pub samples: Vec<String>,
}

impl Errors {
    pub fn note(&mut self, message: String) {
        self.count += 1;
        if self.samples.len() < MAX_ERROR_KINDS && !self.samples.contains(&message) {
            self.samples.push(message);
        }
    }

    pub fn merge(&mut self, other: Errors) {
        self.count += other.count;
        for message in other.samples {
            if self.samples.len() < MAX_ERROR_KINDS && !self.samples.contains(&message) {
                self.samples.push(message);
            }
        }
    }
}

/// Uncontended cycles completed inside the window.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct CycleLog {
    pub cycles: u64,
    /// Heap allocations the whole process made from the start of the
    /// window until every task ended.
    #[serde(default)]
    pub allocations: u64,
    pub errors: Errors,
}

/// One acquisition of the contended key, monotonic nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Acquisition {
    pub waiter: u32,
    /// `acquire` was called.
    pub called: u64,
    /// `acquire` returned the lock.
    pub acquired: u64,
    /// `release` was called.
    pub release_called: u64,
    /// `release` returned: the reference point of the next hand-off.
    pub released: u64,
}

/// Everything the waiters of one process recorded on the contended key.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ContendLog {
    pub acquisitions: Vec<Acquisition>,
    /// Waits still unanswered when the window closed, by start time: they
    /// count toward the longest wait, up to the end of the window.
    pub unfinished_since: Vec<u64>,
    pub errors: Errors,
}

impl ContendLog {
    pub fn merge(&mut self, other: ContendLog) {
        self.acquisitions.extend(other.acquisitions);
        self.unfinished_since.extend(other.unfinished_since);
        self.errors.merge(other.errors);
    }
}

/// `tasks` tasks, each looping acquire → release on a key of its own
/// (`{prefix}:{first_task + i}`) from `start_ns` to `deadline_ns`.
pub async fn cycles(
    locker: &Locker,
    tasks: u32,
    first_task: u32,
    prefix: &str,
    start_ns: u64,
    deadline_ns: u64,
) -> CycleLog {
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let locker = locker.clone();
            let key = format!("{prefix}:{}", first_task + i);
            tokio::spawn(async move {
                sleep_until_ns(start_ns).await;
                let mut log = CycleLog::default();
                while now_ns() < deadline_ns {
                    let outcome = match locker.acquire(&key, deadline_ns).await {
                        Ok(Some(held)) => locker.release(held).await,
                        Ok(None) => break,
                        Err(error) => Err(error),
                    };
                    match outcome {
                        // A cycle that ends after the window closed is not counted.
                        Ok(()) if now_ns() <= deadline_ns => log.cycles += 1,
                        Ok(()) => {}
                        Err(error) => {
                            log.errors.note(error);
                            sleep_until_ns(now_ns() + ERROR_BACKOFF_NS).await;
                        }
                    }
                }
                log
            })
        })
        .collect();
    sleep_until_ns(start_ns).await;
    let allocations_at_start = crate::alloc::allocations();
    let mut total = CycleLog::default();
    for handle in handles {
        match handle.await {
            Ok(log) => {
                total.cycles += log.cycles;
                total.errors.merge(log.errors);
            }
            Err(error) => total.errors.note(format!("task died: {error}")),
        }
    }
    total.allocations = (crate::alloc::allocations() - allocations_at_start).max(0) as u64;
    total
}

/// `waiters` tasks (ids from `first_waiter`) looping acquire → release on
/// one `key` with nothing in between, from `start_ns` to `deadline_ns`.
pub async fn contend(
    locker: &Locker,
    waiters: u32,
    first_waiter: u32,
    key: &str,
    start_ns: u64,
    deadline_ns: u64,
) -> ContendLog {
    let key: Arc<str> = Arc::from(key);
    let handles: Vec<_> = (0..waiters)
        .map(|i| {
            let locker = locker.clone();
            let key = Arc::clone(&key);
            let waiter = first_waiter + i;
            tokio::spawn(async move {
                sleep_until_ns(start_ns).await;
                let mut log = ContendLog::default();
                while now_ns() < deadline_ns {
                    let called = now_ns();
                    let held = match locker.acquire(&key, deadline_ns).await {
                        Ok(Some(held)) => held,
                        Ok(None) => {
                            log.unfinished_since.push(called);
                            break;
                        }
                        Err(error) => {
                            log.errors.note(error);
                            sleep_until_ns(now_ns() + ERROR_BACKOFF_NS).await;
                            continue;
                        }
                    };
                    let acquired = now_ns();
                    // The critical section is empty: the hold is these clock reads.
                    let release_called = now_ns();
                    if let Err(error) = locker.release(held).await {
                        log.errors.note(error);
                    }
                    log.acquisitions.push(Acquisition {
                        waiter,
                        called,
                        acquired,
                        release_called,
                        released: now_ns(),
                    });
                }
                log
            })
        })
        .collect();
    let mut total = ContendLog::default();
    for handle in handles {
        match handle.await {
            Ok(log) => total.merge(log),
            Err(error) => total.errors.note(format!("task died: {error}")),
        }
    }
    total
}

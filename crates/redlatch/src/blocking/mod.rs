//! A synchronous API for programs without an async runtime, like
//! `reqwest::blocking`: the same locks (plain, fair, read-write), semaphores
//! and multi-locks, with
//! methods that block the calling thread instead of returning futures.
//!
//! Each [`Client`] owns a small tokio runtime (one worker thread) that runs
//! the connection, the subscription for wake-ups and the watchdog, so held
//! locks stay renewed while the calling threads do their work. Calls may come
//! from any number of threads at once; clones of a client share its runtime.
//!
//! Dropping a blocking guard releases what it holds **before** the drop
//! returns (one round trip), unlike the async guards, which release in the
//! background: a plain thread that drops a guard and exits leaves nothing held.
//! Dropping the client's last handle stops its runtime before the drop
//! returns (up to 2 s), and with it what the client leaves in Redis (its
//! holder record): a program may end right after.
//!
//! ```
//! # let server = testkit::RedisServer::start().unwrap();
//! # let url = server.url();
//! let client = redlatch::blocking::Client::connect(&url)?; // "redis://127.0.0.1:6379"
//! let lock = client.lock("nightly-report");
//! let worker = std::thread::spawn(move || -> redlatch::Result<u64> {
//!     let guard = lock.acquire()?;      // blocks this thread while held elsewhere
//!     Ok(guard.token())                 // released when `guard` drops
//! });
//! assert!(worker.join().unwrap()? >= 1);
//! # Ok::<(), redlatch::Error>(())
//! ```
//!
//! # Inside an async runtime
//!
//! Calls never panic there (the work runs on the client's own runtime, and
//! the caller waits on a plain channel), but they block the calling thread
//! like any blocking I/O: in async code, use the async API instead, or wrap
//! the call in `tokio::task::spawn_blocking`.

// Adding a wrapper is one file here: a struct holding the async handle and the
// client's `Arc<Bridge>`, whose methods clone the handle into an `async move`
// block and hand it to `Bridge::run` (the acquires of an `AcquireLock` handle
// are `Bridge::acquire` and its kin, in `acquire.rs`). Every hold is the one
// generic `Guard` of `guard.rs`, over the async hold's `HeldLock`: a new kind
// of hold is a type alias and its own extra methods. Then one constructor in
// `client.rs` and one `pub use` line below.

mod acquire;
mod client;
mod fair_lock;
mod guard;
mod lock;
mod multi_lock;
mod permit_semaphore;
mod rw_lock;
mod semaphore;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

pub use client::{Client, ClientBuilder};
pub use fair_lock::FairLock;
pub use guard::Guard;
pub use lock::Lock;
pub use multi_lock::{MultiGuard, MultiLock};
pub use permit_semaphore::{ExpirablePermit, PermitSemaphore};
pub use rw_lock::{ReadGuard, ReadWriteLock, WriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};

use crate::error::{Error, Result};

/// The runtime behind one blocking client and everything made from it.
pub(crate) struct Bridge {
    /// `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bridge")
    }
}

impl Bridge {
    /// Starts the runtime: one worker thread for the connection, the
    /// subscription and the watchdog.
    pub(crate) fn start() -> Result<Arc<Bridge>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlatch-blocking")
            .enable_all()
            .build()
            .map_err(|error| {
                Error::InvalidConfig(format!(
                    "cannot start the blocking client's runtime: {error}"
                ))
            })?;
        Ok(Arc::new(Bridge {
            runtime: Some(runtime),
        }))
    }

    /// Runs `call` on the runtime and blocks the calling thread until it is
    /// done. Never panics, even inside another runtime.
    pub(crate) fn run<T, F>(&self, op: &'static str, call: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(Error::RuntimeGone { op });
        };
        let (reply_to, reply) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = reply_to.send(call.await);
        });
        // A closed channel: the task was dropped (runtime shut down, or a panic).
        reply.recv().unwrap_or(Err(Error::RuntimeGone { op }))
    }
}

impl Bridge {
    /// Runs a future that borrows from the caller on the calling thread,
    /// within the runtime's context (its timers and connections are driven by
    /// the runtime's worker). For the few calls that cannot be handed to a task.
    pub(crate) fn run_borrowed<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        let Some(runtime) = &self.runtime else {
            return Err(Error::RuntimeGone { op: "call" });
        };
        let _context = runtime.enter();
        let mut call = pin!(call);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut context = Context::from_waker(&waker);
        loop {
            match call.as_mut().poll(&mut context) {
                Poll::Ready(outcome) => return outcome,
                // Woken spuriously at times: polling again is harmless.
                Poll::Pending => std::thread::park(),
            }
        }
    }
}

/// Wakes the thread that polls a borrowed future.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The longest the last handle's drop waits for the runtime to stop: the
/// client's last word (its holder record deleted on a connection of its
/// own) takes a second at most.
const SHUTDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Waiting for the worker panics inside an async context.
                runtime.shutdown_background();
            } else {
                // A program may end right after this drop: what the client
                // leaves in Redis goes before it returns.
                runtime.shutdown_timeout(SHUTDOWN_LIMIT);
            }
        }
    }
}

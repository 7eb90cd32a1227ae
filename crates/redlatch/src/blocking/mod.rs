//! A synchronous API for programs without an async runtime, like
//! `reqwest::blocking`: the same locks (plain, fair, spin, read-write),
//! semaphores, multi-locks and count-down latches, with the same acquire shape (a lease on the
//! handle; `acquire`, `try_acquire`, `acquire_within`), and
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

// Every blocking handle is the one generic `Handle` (an async handle and
// the runtime it blocks on, `engine/blocking_handle.rs`, below the
// primitives): a lock's acquires are written once in `handle.rs` over the
// async handle's `AcquireLock` (name, lease, the three acquires), with the
// few methods of its own kind in its file here; every hold is the one
// generic `Guard` of `guard.rs`, over the async hold's `HeldLock`. A
// primitive that is not a lock writes its blocking methods in its own
// folder (`count_down_latch/blocking.rs`: `impl Handle<CountDownLatch>`),
// and `Client::handle::<P>` makes it: nothing here changes for it. The
// named aliases and constructors below are conveniences.

mod client;
mod fair_lock;
mod guard;
mod handle;
mod lock;
mod multi_lock;
mod permit_semaphore;
mod rw_lock;
mod semaphore;
mod token_lock;

pub use crate::engine::blocking_handle::Handle;
pub use client::{Client, ClientBuilder};
pub use fair_lock::FairLock;
pub use guard::Guard;
pub use lock::{Lock, SpinLock};
pub use multi_lock::{MultiGuard, MultiLock};
pub use permit_semaphore::{ExpirablePermit, PermitSemaphore};
pub use rw_lock::{ReadGuard, ReadWriteLock, WriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use token_lock::TokenLock;

/// A blocking [`crate::CountDownLatch`]: the same calls, which block the
/// calling thread (`client.count_down_latch(name)`, or
/// `client.handle::<redlatch::CountDownLatch>(name)`).
pub type CountDownLatch = Handle<crate::CountDownLatch>;

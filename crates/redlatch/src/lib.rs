//! # redlatch — distributed locks on Redis
//!
//! A reentrant lock shared by every process that talks to one Redis server,
//! with the parts a production lock needs and most recipes leave out:
//!
//! - **Owner tokens and atomic release.** Only the owner can release; release
//!   and re-entry run as Lua scripts: one function library where the server
//!   has functions (nothing to reload after a restart or failover), EVALSHA
//!   elsewhere ([`Client::capabilities`] says which).
//! - **A watchdog.** One task per client renews every held lock (and
//!   expirable permit) at a third of its lease, up to [`Client::RENEW_BATCH`] per
//!   round trip, and tells the guard when its lock is gone ([`Guard::lost`],
//!   [`Guard::is_held`]).
//! - **Fencing tokens.** Each acquisition gets a number strictly increasing per
//!   lock name ([`Guard::token`]), so the protected resource can refuse writes
//!   from a holder that stalled past its lease.
//! - **Wake-ups, not polling.** Waiters park on the lock's pub/sub channel and
//!   are woken one at a time when it is released, or when the holder's lease
//!   runs out.
//! - **Redisson's key layout.** A Java service using Redisson's `RLock` and a
//!   Rust service using redlatch exclude each other on the same name.
//! - **Cancellation by drop.** Dropping a waiting acquire leaves nothing in
//!   Redis; dropping a guard releases it.
//! - **Redlock.** [`Redlock`] holds one lock over N independent masters
//!   while a majority grants it, with the same API, calls sent to all
//!   masters at once, and fencing tokens that keep increasing across them
//!   (`docs/REDLOCK.md` of the repository).
//!
//! ## The pattern
//!
//! A handler that must not run twice at once for one user: wait a bounded
//! time, work while the lock is held and stop if it is lost, pass the
//! fencing token to the store so that a holder that stalled past its lease
//! cannot overwrite a newer one, and read `NotHeld` on release as "the
//! lease ran out while I worked".
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> redlatch::Result<()> {
//! # let server = testkit::RedisServer::start().unwrap();
//! # let url = server.url();
//! # /// The protected resource: refuses a write older than one it took.
//! # struct Store { newest: std::sync::Mutex<u64> }
//! # impl Store {
//! #     async fn place_order(&self, token: u64, _order: &str) -> Result<(), String> {
//! #         let mut newest = self.newest.lock().unwrap();
//! #         if token < *newest { return Err(format!("stale token {token}")); }
//! #         *newest = token;
//! #         Ok(())
//! #     }
//! # }
//! # let store = Store { newest: std::sync::Mutex::new(0) };
//! use std::time::Duration;
//! use redlatch::Error;
//!
//! let client = redlatch::Client::connect(&url).await?; // "redis://127.0.0.1:6379"
//! let lock = client.lock("voucher:7:user:42");
//!
//! // A bounded wait: a busy lock is an answer ("try again"), not a hang.
//! let guard = match lock.acquire_within(Some(Duration::from_millis(200))).await {
//!     Ok(guard) => guard,
//!     Err(Error::Timeout { .. }) => return Ok(()), // busy: tell the user
//!     Err(other) => return Err(other),
//! };
//! // Work while held; the watchdog renews the lease meanwhile. `lost()`
//! // resolves if the lock goes (a stall past the lease, a failover).
//! tokio::select! {
//!     placed = store.place_order(guard.token(), "voucher 7") => {
//!         placed.expect("the store refuses only stale tokens");
//!     }
//!     () = guard.lost() => {
//!         eprintln!("lock lost ({:?}): the order may not have been placed", guard.lost_reason());
//!         return Ok(());
//!     }
//! }
//! match guard.release().await {
//!     Ok(()) => {}
//!     // The lease ran out before the release: the token kept the store
//!     // safe, but the work was not protected to its end.
//!     Err(Error::NotHeld { .. }) => eprintln!("lock lost before the release"),
//!     Err(other) => return Err(other),
//! }
//!
//! // Re-entry: the same owner holds it again, with the same token.
//! if let Some(guard) = lock.try_acquire().await? {
//!     let again = guard.reenter().await?; // hold count 2
//!     assert_eq!(again.token(), guard.token());
//! } // both dropped: released in the background
//! # Ok(())
//! # }
//! ```
//!
//! The same with no async runtime (the `blocking` feature):
//! `blocking::Client::builder(url)` takes the same settings, and its
//! handles have the same calls, which block.
//!
//! ## Other primitives
//!
//! - [`Semaphore`]: N permits shared by every process (Redisson's `RSemaphore`);
//!   a [`SemaphorePermit`] gives its permits back on drop.
//! - [`PermitSemaphore`]: permits with ids and leases, renewed while their
//!   [`ExpirablePermit`] lives and reclaimed after a dead holder (Redisson's
//!   `RPermitExpirableSemaphore`).
//! - [`MultiLock`]: several locks, possibly on several servers, taken all or
//!   nothing in key order (so never deadlocked), released together.
//! - [`FairLock`] ([`Client::fair_lock`]): waiters in every process get the
//!   lock in the order they came; a waiter that dies is skipped after its
//!   place lease (Redisson's `RFairLock`).
//! - [`ReadWriteLock`] ([`Client::read_write_lock`]): many readers or one
//!   writer, reentrant, writers may downgrade, and a waiting writer is not
//!   starved by new readers (Redisson's `RReadWriteLock`).
//! - [`CountDownLatch`] ([`Client::count_down_latch`]): a count set once,
//!   counted down by any process; the count down that reaches zero wakes
//!   every waiter in every process (Redisson's `RCountDownLatch`).
//! - `blocking` (the `blocking` feature): the same API for programs without
//!   an async runtime.
//!
//! Each but the reentrant and spin locks is also made by one generic
//! method, [`Client::handle`] (`client.handle::<CountDownLatch>(name)`),
//! over the [`Primitive`] trait.
//!
//! ## Redis data
//!
//! | what | key / channel | content |
//! |---|---|---|
//! | the lock | `PREFIX+NAME` | hash: `<client-id>:<owner>` → hold count; PEXPIRE = lease |
//! | wake-ups | `redisson_lock__channel:{PREFIX+NAME}` | `0` published on the final release |
//! | fencing counter | `redlatch_lock_token` (`redlatch_lock_token:{TAG}` per hash slot on a cluster; `redisson_lock_token:{PREFIX+NAME}` with `per_name_token_counters`) | shared by every lock: INCR on each fresh acquisition (absent: the server's time in µs); never expires |
//!
//! ## Deployments
//!
//! One server ([`Client::connect`]), a Redis Cluster
//! ([`ClientBuilder::cluster`]: slots followed, sharded pub/sub), a
//! Sentinel-watched master ([`ClientBuilder::sentinel`]: failovers
//! followed), or independent masters ([`Redlock`]); [`Deployment`] names any
//! of them the same way in code, in a settings file's `[redis]` section and,
//! with the `clap` feature, as command-line flags (`DeploymentArgs`).
//!
//! What a client keeps on the server (connections, keys, commands per
//! acquire) is tabled in the README, "What redlatch puts on your Redis";
//! [`ClientBuilder::lean`] drops the two extras (holder records and the
//! loss watch's connection).
//!
//! ## Features
//!
//! `default-features = false` leaves the lock itself (every primitive,
//! Redlock, the watchdog, wake-ups, fencing) over `redis` and `tokio`.
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `settings-file` | yes | `Settings::from_toml`/`load`, `Deployment::from_toml`/`load`: TOML settings files |
//! | `metrics` | yes | `redlatch::metrics`: series through the `metrics` facade |
//! | `holder-records` | yes | `HolderIdentity`: each client names itself as the holder of its locks, read back by `Lock::status` |
//! | `watch` | no | `Client::watch_settings`: a settings file reloaded as it changes (implies `settings-file`) |
//! | `blocking` | no | `redlatch::blocking`: the same API for programs without an async runtime |
//! | `tls` | no | `rediss://` URLs, a private CA and client certificates ([`TlsFiles`]; rustls with the ring provider, installed if the program chose none) |
//! | `clap` | no | `DeploymentArgs`: `--redis`, `--redis-cluster`, `--sentinel`, `--sentinel-master`, `--tls-*` for a clap 4 program |
//!
//! Cluster and Sentinel support need no feature: they are always built.
//! The minimum supported Rust version is 1.94 (checked in CI).
//!
//! ## Faults
//!
//! Every failure is an [`Error`] variant whose docs say what to do. What each
//! fault does to a held lock (process pause, crash, Redis restart, lost
//! subscription...) is described in `docs/SAFETY.md` of the repository.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod base;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod client;
mod count_down_latch;
pub mod deadlock;
mod engine;
mod error;
mod fair_lock;
mod lease_clock;
mod lock;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod multi_lock;
mod primitives;
mod redlock;
mod rw_lock;
mod scripts;
mod semaphore;
mod settings;
mod spin_lock;
mod sync;
mod token_lock;
mod transport;
mod vocabulary;
mod wait_link;

pub use base::guard::Guard;
#[cfg(feature = "holder-records")]
#[cfg_attr(docsrs, doc(cfg(feature = "holder-records")))]
pub use base::holder_identity::HolderIdentity;
pub use base::status::{Holder, LockMode, LockStatus};
pub use client::Client;
pub use client::builder::{Builder, ClientBuilder};
pub use count_down_latch::CountDownLatch;
pub use deadlock::WaitLink;
pub use engine::by_name::Primitive;
pub use engine::hold::LostReason;
pub use error::{Error, NodeFailure, Result, TimeLimit};
pub use fair_lock::FairLock;
pub use lock::Lock;
pub use multi_lock::{MultiGuard, MultiLock};
pub use redlock::{NodeStatus, Redlock, RedlockGuard, RedlockLock, RedlockStatus};
pub use rw_lock::ReadWriteLock;
pub use rw_lock::guard::{ReadGuard, WriteGuard};
pub use rw_lock::sides::{ReadSide, WriteSide};
pub use semaphore::permit::{ExpirablePermit, PermitSemaphore};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use settings::cluster_pubsub::ClusterPubSub;
pub use settings::deployment::{Deployment, Servers};
#[cfg(feature = "clap")]
#[cfg_attr(docsrs, doc(cfg(feature = "clap")))]
pub use settings::flags::DeploymentArgs;
pub use settings::tls_files::TlsFiles;
#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use settings::watch::SettingsWatcher;
pub use settings::{RetryPolicy, Settings};
pub use spin_lock::SpinLock;
pub use token_lock::{TokenGuard, TokenLock};
pub use transport::capabilities::{Capabilities, ServerVersion, Support};
pub use transport::shared::RedisConnection;
pub use vocabulary::{AcquireLock, ExtendLease, Fenced, HeldLock, Reenter};

/// The Rust snippets of the README, compiled by `cargo test --doc` so that
/// they stay true to the API (one of them uses the blocking facade).
#[cfg(all(doctest, feature = "blocking"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSnippets;

/// The Rust snippets of docs/DEPLOYMENT.md, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/DEPLOYMENT.md")]
pub struct DeploymentSnippets;

/// The Rust snippets of docs/REDLOCK.md, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/REDLOCK.md")]
pub struct RedlockSnippets;

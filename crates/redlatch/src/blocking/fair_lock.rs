//! The blocking fair lock.

use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use super::guard::Guard;
use crate::LockStatus;
use crate::error::Result;

/// A blocking [`crate::FairLock`]: waiters in every process get the lock in
/// the order they started waiting, and the calling thread blocks meanwhile.
/// Each method's round trips, keys and errors are those of the async method
/// of the same name; acquires return the blocking [`Guard`].
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let lock = client.fair_lock("print-queue");
/// let guard = lock.acquire()?;
/// assert!(guard.is_held());
/// guard.release()?;
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FairLock {
    inner: crate::FairLock,
    bridge: Arc<Bridge>,
}

impl FairLock {
    pub(super) fn new(inner: crate::FairLock, bridge: Arc<Bridge>) -> FairLock {
        FairLock { inner, bridge }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same lock, acquired by the named owner (see [`crate::FairLock::with_owner`]).
    pub fn with_owner(self, owner: impl Into<String>) -> FairLock {
        FairLock {
            inner: self.inner.with_owner(owner),
            bridge: self.bridge,
        }
    }

    /// The same lock with another place lease (see [`crate::FairLock::with_place_lease`]).
    pub fn with_place_lease(self, lease: Duration) -> FairLock {
        FairLock {
            inner: self.inner.with_place_lease(lease),
            bridge: self.bridge,
        }
    }

    /// The same lock with a fixed lease (see [`crate::FairLock::with_lease`]).
    pub fn with_lease(self, lease: Duration) -> FairLock {
        FairLock {
            inner: self.inner.with_lease(lease),
            bridge: self.bridge,
        }
    }

    /// Blocks until this thread's turn comes (see [`crate::FairLock::acquire`]).
    ///
    /// # Errors
    /// As [`crate::FairLock::acquire`].
    pub fn acquire(&self) -> Result<Guard> {
        self.bridge.acquire("fair acquire", &self.inner)
    }

    /// One attempt that never joins the line (see [`crate::FairLock::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::FairLock::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<Guard>> {
        self.bridge.try_acquire("fair acquire", &self.inner)
    }

    /// Waits in line at most `wait` (see [`crate::FairLock::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::FairLock::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<Guard> {
        self.bridge
            .acquire_timeout("fair acquire", &self.inner, wait)
    }

    /// Holders and the waiting line (see [`crate::FairLock::status`]).
    ///
    /// # Errors
    /// As [`crate::FairLock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        let lock = self.inner.clone();
        self.bridge
            .run("status", async move { lock.status().await })
    }
}

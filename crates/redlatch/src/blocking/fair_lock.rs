//! The blocking fair lock: the one [`Handle`], and the fair lock's own methods.

use std::time::Duration;

use crate::LockStatus;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`crate::FairLock`]: waiters in every process get the lock in
/// the order they started waiting, and the calling thread blocks meanwhile.
/// Each method's round trips, keys and errors are those of the async method
/// of the same name; the acquires are [`Handle`]'s and return the blocking
/// [`Guard`](super::Guard).
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
pub type FairLock = Handle<crate::FairLock>;

impl Handle<crate::FairLock> {
    /// The same lock, acquired by the named owner (see [`crate::FairLock::with_owner`]).
    pub fn with_owner(self, owner: impl Into<String>) -> FairLock {
        self.map(|lock| lock.with_owner(owner))
    }

    /// The same lock with another place lease (see [`crate::FairLock::with_place_lease`]).
    pub fn with_place_lease(self, lease: Duration) -> FairLock {
        self.map(|lock| lock.with_place_lease(lease))
    }

    /// Holders and the waiting line (see [`crate::FairLock::status`]).
    ///
    /// # Errors
    /// As [`crate::FairLock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        self.run("status", |lock| async move { lock.status().await })
    }
}

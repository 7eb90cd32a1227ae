//! The blocking lock and spin lock: the one [`Handle`], and the lock's own methods.

use std::time::Duration;

use super::guard::Guard;
use crate::LockStatus;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`crate::Lock`]: the same lock, with methods that block the
/// calling thread (the acquires are [`Handle`]'s). Each method's round
/// trips, keys and errors are those of the async method of the same name.
pub type Lock = Handle<crate::Lock>;

/// A blocking [`crate::SpinLock`]: the lock whose waiters poll (the
/// acquires are [`Handle`]'s).
pub type SpinLock = Handle<crate::SpinLock>;

impl Handle<crate::Lock> {
    /// The same lock, acquired by the named owner (see [`crate::Lock::with_owner`]).
    pub fn with_owner(self, owner: impl Into<String>) -> Lock {
        self.map(|lock| lock.with_owner(owner))
    }

    /// Deletes the lock whoever holds it (see [`crate::Lock::force_unlock`]).
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.run(
            "force unlock",
            |lock| async move { lock.force_unlock().await },
        )
    }

    /// A snapshot of the lock (see [`crate::Lock::status`]).
    ///
    /// # Errors
    /// As [`crate::Lock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        self.run("status", |lock| async move { lock.status().await })
    }
}

impl Guard<crate::Guard> {
    /// The Redis key of the lock (prefix included).
    pub fn key(&self) -> &str {
        self.get().key()
    }

    /// The lease it was acquired with (see [`crate::Guard::lease`]).
    pub fn lease(&self) -> Duration {
        self.get().lease()
    }
}

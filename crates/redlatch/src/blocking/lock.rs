//! The blocking lock and its guard.

use std::sync::Arc;
use std::time::Duration;

use super::Bridge;
use crate::LockStatus;
use crate::engine::hold::LostReason;
use crate::error::Result;

/// A blocking [`crate::Lock`]: the same lock, with methods that block the
/// calling thread. Each method's round trips, keys and errors are those of
/// the async method of the same name.
#[derive(Clone, Debug)]
pub struct Lock {
    inner: crate::Lock,
    bridge: Arc<Bridge>,
}

impl Lock {
    pub(super) fn new(inner: crate::Lock, bridge: Arc<Bridge>) -> Lock {
        Lock { inner, bridge }
    }

    pub(super) fn parts(&self) -> (&crate::Lock, &Arc<Bridge>) {
        (&self.inner, &self.bridge)
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same lock, acquired by the named owner (see [`crate::Lock::with_owner`]).
    pub fn with_owner(self, owner: impl Into<String>) -> Lock {
        Lock {
            inner: self.inner.with_owner(owner),
            bridge: self.bridge,
        }
    }

    /// Blocks until the lock is held (see [`crate::Lock::acquire`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire`].
    pub fn acquire(&self) -> Result<Guard> {
        let lock = self.inner.clone();
        let guard = self
            .bridge
            .run("acquire", async move { lock.acquire().await })?;
        Ok(self.guard(guard))
    }

    /// One attempt (see [`crate::Lock::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<Guard>> {
        let lock = self.inner.clone();
        let guard = self
            .bridge
            .run("acquire", async move { lock.try_acquire().await })?;
        Ok(guard.map(|guard| self.guard(guard)))
    }

    /// Blocks at most `wait` (see [`crate::Lock::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<Guard> {
        let lock = self.inner.clone();
        let guard = self
            .bridge
            .run("acquire", async move { lock.acquire_timeout(wait).await })?;
        Ok(self.guard(guard))
    }

    /// Blocks until held, with a fixed lease (see [`crate::Lock::acquire_with_lease`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_with_lease`].
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<Guard> {
        let lock = self.inner.clone();
        let guard = self.bridge.run(
            "acquire",
            async move { lock.acquire_with_lease(lease).await },
        )?;
        Ok(self.guard(guard))
    }

    /// Blocks at most `wait`, with a fixed lease (see
    /// [`crate::Lock::acquire_timeout_with_lease`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_timeout_with_lease`].
    pub fn acquire_timeout_with_lease(&self, wait: Duration, lease: Duration) -> Result<Guard> {
        let lock = self.inner.clone();
        let guard = self.bridge.run("acquire", async move {
            lock.acquire_timeout_with_lease(wait, lease).await
        })?;
        Ok(self.guard(guard))
    }

    /// Deletes the lock whoever holds it (see [`crate::Lock::force_unlock`]).
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        let lock = self.inner.clone();
        self.bridge
            .run("force unlock", async move { lock.force_unlock().await })
    }

    /// A snapshot of the lock (see [`crate::Lock::status`]).
    ///
    /// # Errors
    /// As [`crate::Lock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        let lock = self.inner.clone();
        self.bridge
            .run("status", async move { lock.status().await })
    }

    fn guard(&self, guard: crate::Guard) -> Guard {
        Guard::new(guard, self.bridge.clone())
    }
}

/// A blocking [`crate::Guard`]. Dropping it releases the hold before the
/// drop returns; [`release`](Guard::release) does the same and reports errors.
#[must_use = "dropping a guard releases the lock at once"]
#[derive(Debug)]
pub struct Guard {
    /// `None` once released.
    inner: Option<crate::Guard>,
    bridge: Arc<Bridge>,
}

impl Guard {
    pub(super) fn new(inner: crate::Guard, bridge: Arc<Bridge>) -> Guard {
        Guard {
            inner: Some(inner),
            bridge,
        }
    }

    fn get(&self) -> &crate::Guard {
        self.inner.as_ref().expect("a guard is released only once")
    }

    /// The fencing token (see [`crate::Guard::token`]).
    pub fn token(&self) -> u64 {
        self.get().token()
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// The Redis key of the lock (prefix included).
    pub fn key(&self) -> &str {
        self.get().key()
    }

    /// True while the lock is known to be held (see [`crate::Guard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.get().is_held()
    }

    /// Why the lock is no longer held, once it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.get().lost_reason()
    }

    /// Blocks until the lock is known to be lost or `limit` passes; returns
    /// whether it was lost (the blocking form of [`crate::Guard::lost`]).
    pub fn wait_lost(&self, limit: Duration) -> bool {
        let lost = self.get().lost();
        self.bridge
            .run("wait lost", async move {
                Ok(tokio::time::timeout(limit, lost).await.is_ok())
            })
            .unwrap_or(true)
    }

    /// Takes one more hold for the same owner (see [`crate::Guard::reenter`]).
    ///
    /// # Errors
    /// As [`crate::Guard::reenter`].
    pub fn reenter(&self) -> Result<Guard> {
        // The async call borrows the guard, so it runs on this thread.
        let reentered = self.bridge.run_borrowed(self.get().reenter())?;
        Ok(Guard::new(reentered, self.bridge.clone()))
    }

    /// Gives this hold back now (see [`crate::Guard::release`]).
    ///
    /// # Errors
    /// As [`crate::Guard::release`].
    pub fn release(mut self) -> Result<()> {
        let guard = self.inner.take().expect("a guard is released only once");
        self.bridge
            .run("release", async move { guard.release().await })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(guard) = self.inner.take() {
            // A failure means the lock was lost or Redis is away: it expires by itself.
            let _ = self
                .bridge
                .run("release", async move { guard.release().await });
        }
    }
}

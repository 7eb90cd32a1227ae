//! The blocking lock.

use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use super::guard::Guard;
use crate::LockStatus;
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

    /// The same lock, with holds on a fixed `lease` that the watchdog does
    /// not renew (see [`crate::Lock::with_lease`]): its `acquire`,
    /// `try_acquire` and `acquire_timeout` take that lease.
    pub fn with_lease(self, lease: Duration) -> Lock {
        Lock {
            inner: self.inner.with_lease(lease),
            bridge: self.bridge,
        }
    }

    /// Blocks until the lock is held (see [`crate::Lock::acquire`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire`].
    pub fn acquire(&self) -> Result<Guard> {
        self.bridge.acquire("acquire", &self.inner)
    }

    /// One attempt (see [`crate::Lock::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<Guard>> {
        self.bridge.try_acquire("acquire", &self.inner)
    }

    /// Blocks at most `wait` (see [`crate::Lock::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<Guard> {
        self.bridge.acquire_timeout("acquire", &self.inner, wait)
    }

    /// Blocks as long as the settings' wait timeout says (see
    /// [`crate::Lock::acquire_default_wait`]).
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_default_wait`].
    pub fn acquire_default_wait(&self) -> Result<Guard> {
        let lock = self.inner.clone();
        let guard = self
            .bridge
            .run("acquire", async move { lock.acquire_default_wait().await })?;
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

    /// One attempt with a fixed lease (see [`crate::Lock::try_acquire_with_lease`]).
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire_with_lease`].
    pub fn try_acquire_with_lease(&self, lease: Duration) -> Result<Option<Guard>> {
        let lock = self.inner.clone();
        let guard = self.bridge.run("acquire", async move {
            lock.try_acquire_with_lease(lease).await
        })?;
        Ok(guard.map(|guard| self.guard(guard)))
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

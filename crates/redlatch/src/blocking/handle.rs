//! The acquires of the one blocking handle (`engine/blocking_handle.rs`),
//! written once over [`AcquireLock`]: every blocking lock
//! ([`Lock`](super::Lock), [`FairLock`](super::FairLock),
//! [`SpinLock`](super::SpinLock), [`PermitSemaphore`](super::PermitSemaphore),
//! a read-write lock's sides) is a [`Handle`] over its async handle, plus
//! the few methods of its own kind.

use std::time::Duration;

use super::guard::Guard;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;
use crate::vocabulary::AcquireLock;

impl<L> Handle<L>
where
    L: AcquireLock + Clone + Send + Sync + 'static,
    L::Guard: Send + 'static,
{
    /// The name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same handle, whose holds have a fixed `lease` that the watchdog
    /// does not renew (see [`AcquireLock::with_lease`]): every acquire of
    /// the handle takes that lease.
    pub fn with_lease(self, lease: Duration) -> Handle<L> {
        self.map(|inner| inner.with_lease(lease))
    }

    /// Blocks until held, or for at most the client's wait timeout when it
    /// is set (see [`AcquireLock::acquire`]).
    ///
    /// # Errors
    /// As the async handle's `acquire`.
    pub fn acquire(&self) -> Result<Guard<L::Guard>> {
        let held = self.run("acquire", |inner| async move { inner.acquire().await })?;
        Ok(Guard::new(held, self.bridge.clone()))
    }

    /// One attempt (see [`AcquireLock::try_acquire`]).
    ///
    /// # Errors
    /// As the async handle's `try_acquire`.
    pub fn try_acquire(&self) -> Result<Option<Guard<L::Guard>>> {
        let held = self.run("acquire", |inner| async move { inner.try_acquire().await })?;
        Ok(held.map(|held| Guard::new(held, self.bridge.clone())))
    }

    /// Blocks until held (`None`) or at most `wait` (see
    /// [`AcquireLock::acquire_within`]).
    ///
    /// # Errors
    /// As the async handle's `acquire_within`.
    pub fn acquire_within(&self, wait: Option<Duration>) -> Result<Guard<L::Guard>> {
        let held = self.run("acquire", move |inner| async move {
            inner.acquire_within(wait).await
        })?;
        Ok(Guard::new(held, self.bridge.clone()))
    }
}

//! The blocking permit-expirable semaphore and its permit.

use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use super::guard::Guard;
use crate::error::Result;

/// A blocking [`crate::PermitSemaphore`]. Each method's round trips, keys and
/// errors are those of the async method of the same name. Permits are renewed
/// by the client's runtime while their guards live.
#[derive(Clone, Debug)]
pub struct PermitSemaphore {
    inner: crate::PermitSemaphore,
    bridge: Arc<Bridge>,
}

impl PermitSemaphore {
    pub(super) fn new(inner: crate::PermitSemaphore, bridge: Arc<Bridge>) -> PermitSemaphore {
        PermitSemaphore { inner, bridge }
    }

    /// The semaphore's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the permits if none are set (see [`crate::PermitSemaphore::try_set_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let sem = self.inner.clone();
        self.bridge.run("permit try_set_permits", async move {
            sem.try_set_permits(permits).await
        })
    }

    /// Adds (or takes away) permits (see [`crate::PermitSemaphore::add_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        let sem = self.inner.clone();
        self.bridge.run(
            "permit add_permits",
            async move { sem.add_permits(delta).await },
        )
    }

    /// Reclaims expired permits and counts the free ones (see
    /// [`crate::PermitSemaphore::available_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        let sem = self.inner.clone();
        self.bridge.run(
            "permit available",
            async move { sem.available_permits().await },
        )
    }

    /// Blocks until a permit is free and takes it (see [`crate::PermitSemaphore::acquire`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::acquire`].
    pub fn acquire(&self) -> Result<ExpirablePermit> {
        self.bridge.acquire("permit acquire", &self.inner)
    }

    /// One attempt (see [`crate::PermitSemaphore::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<ExpirablePermit>> {
        self.bridge.try_acquire("permit acquire", &self.inner)
    }

    /// Blocks at most `wait` (see [`crate::PermitSemaphore::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<ExpirablePermit> {
        self.bridge
            .acquire_timeout("permit acquire", &self.inner, wait)
    }

    /// Blocks until a permit is free, with a fixed lease (see
    /// [`crate::PermitSemaphore::acquire_with_lease`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::acquire_with_lease`].
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<ExpirablePermit> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("permit acquire", async move {
            sem.acquire_with_lease(lease).await
        })?;
        Ok(Guard::new(permit, self.bridge.clone()))
    }
}

/// A blocking [`crate::ExpirablePermit`]: the blocking [`Guard`] of a
/// permit. Dropping it gives the permit back before the drop returns;
/// [`release`](Guard::release) does the same and reports errors.
pub type ExpirablePermit = Guard<crate::ExpirablePermit>;

impl Guard<crate::ExpirablePermit> {
    /// The permit id (see [`crate::ExpirablePermit::id`]).
    pub fn id(&self) -> &str {
        self.get().id()
    }
}

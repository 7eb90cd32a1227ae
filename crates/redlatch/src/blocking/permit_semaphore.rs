//! The blocking permit-expirable semaphore and its permit.

use std::sync::Arc;
use std::time::Duration;

use super::Bridge;
use crate::engine::hold::LostReason;
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
        let sem = self.inner.clone();
        let permit = self
            .bridge
            .run("permit acquire", async move { sem.acquire().await })?;
        Ok(self.permit(permit))
    }

    /// One attempt (see [`crate::PermitSemaphore::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<ExpirablePermit>> {
        let sem = self.inner.clone();
        let permit = self
            .bridge
            .run("permit acquire", async move { sem.try_acquire().await })?;
        Ok(permit.map(|permit| self.permit(permit)))
    }

    /// Blocks at most `wait` (see [`crate::PermitSemaphore::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::acquire_timeout`].
    pub fn acquire_timeout(&self, wait: Duration) -> Result<ExpirablePermit> {
        let sem = self.inner.clone();
        let permit =
            self.bridge.run(
                "permit acquire",
                async move { sem.acquire_timeout(wait).await },
            )?;
        Ok(self.permit(permit))
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
        Ok(self.permit(permit))
    }

    fn permit(&self, permit: crate::ExpirablePermit) -> ExpirablePermit {
        ExpirablePermit {
            inner: Some(permit),
            bridge: self.bridge.clone(),
        }
    }
}

/// A blocking [`crate::ExpirablePermit`]. Dropping it gives the permit back
/// before the drop returns.
#[must_use = "dropping a permit gives it back at once"]
#[derive(Debug)]
pub struct ExpirablePermit {
    /// `None` once released.
    inner: Option<crate::ExpirablePermit>,
    bridge: Arc<Bridge>,
}

impl ExpirablePermit {
    fn get(&self) -> &crate::ExpirablePermit {
        self.inner.as_ref().expect("a permit is released only once")
    }

    /// The permit id.
    pub fn id(&self) -> &str {
        self.get().id()
    }

    /// True while the permit is known to be held (see [`crate::ExpirablePermit::is_held`]).
    pub fn is_held(&self) -> bool {
        self.get().is_held()
    }

    /// Why the permit is no longer held, once it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.get().lost_reason()
    }

    /// Blocks until the permit is known to be lost or `limit` passes; returns
    /// whether it was lost (the blocking form of [`crate::ExpirablePermit::lost`]).
    pub fn wait_lost(&self, limit: Duration) -> bool {
        let lost = self.get().lost();
        self.bridge
            .run("wait lost", async move {
                Ok(tokio::time::timeout(limit, lost).await.is_ok())
            })
            .unwrap_or(true)
    }

    /// Gives the permit back now (see [`crate::ExpirablePermit::release`]).
    ///
    /// # Errors
    /// As [`crate::ExpirablePermit::release`].
    pub fn release(mut self) -> Result<()> {
        let permit = self.inner.take().expect("a permit is released only once");
        self.bridge
            .run("permit release", async move { permit.release().await })
    }
}

impl Drop for ExpirablePermit {
    fn drop(&mut self) {
        if let Some(permit) = self.inner.take() {
            let _ = self
                .bridge
                .run("permit release", async move { permit.release().await });
        }
    }
}

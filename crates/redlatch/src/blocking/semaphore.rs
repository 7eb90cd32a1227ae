//! The blocking counting semaphore and its permit.

use std::sync::Arc;
use std::time::Duration;

use super::Bridge;
use crate::error::Result;

/// A blocking [`crate::Semaphore`]. Each method's round trips, keys and
/// errors are those of the async method of the same name.
#[derive(Clone, Debug)]
pub struct Semaphore {
    inner: crate::Semaphore,
    bridge: Arc<Bridge>,
}

impl Semaphore {
    pub(super) fn new(inner: crate::Semaphore, bridge: Arc<Bridge>) -> Semaphore {
        Semaphore { inner, bridge }
    }

    /// The semaphore's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the permits if none are set (see [`crate::Semaphore::try_set_permits`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let sem = self.inner.clone();
        self.bridge.run("semaphore try_set_permits", async move {
            sem.try_set_permits(permits).await
        })
    }

    /// Adds (or takes away) permits (see [`crate::Semaphore::add_permits`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        let sem = self.inner.clone();
        self.bridge.run("semaphore add_permits", async move {
            sem.add_permits(delta).await
        })
    }

    /// Permits free now (see [`crate::Semaphore::available_permits`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        let sem = self.inner.clone();
        self.bridge.run("semaphore available_permits", async move {
            sem.available_permits().await
        })
    }

    /// Blocks until `permits` are free and takes them (see [`crate::Semaphore::acquire`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<SemaphorePermit> {
        let sem = self.inner.clone();
        let permit = self.bridge.run(
            "semaphore acquire",
            async move { sem.acquire(permits).await },
        )?;
        Ok(self.permit(permit))
    }

    /// One attempt (see [`crate::Semaphore::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("semaphore acquire", async move {
            sem.try_acquire(permits).await
        })?;
        Ok(permit.map(|permit| self.permit(permit)))
    }

    /// Blocks at most `wait` (see [`crate::Semaphore::acquire_timeout`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_timeout`].
    pub fn acquire_timeout(&self, permits: u32, wait: Duration) -> Result<SemaphorePermit> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("semaphore acquire", async move {
            sem.acquire_timeout(permits, wait).await
        })?;
        Ok(self.permit(permit))
    }

    /// Gives back permits without a guard (see [`crate::Semaphore::release`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<u64> {
        let sem = self.inner.clone();
        self.bridge.run(
            "semaphore release",
            async move { sem.release(permits).await },
        )
    }

    fn permit(&self, permit: crate::SemaphorePermit) -> SemaphorePermit {
        SemaphorePermit {
            inner: Some(permit),
            bridge: self.bridge.clone(),
        }
    }
}

/// A blocking [`crate::SemaphorePermit`]. Dropping it gives the permits back
/// before the drop returns.
#[must_use = "dropping a permit gives it back at once"]
#[derive(Debug)]
pub struct SemaphorePermit {
    /// `None` once released or forgotten.
    inner: Option<crate::SemaphorePermit>,
    bridge: Arc<Bridge>,
}

impl SemaphorePermit {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.inner
            .as_ref()
            .map_or(0, crate::SemaphorePermit::permits)
    }

    /// Gives the permits back now; returns the new count (see
    /// [`crate::SemaphorePermit::release`]).
    ///
    /// # Errors
    /// As [`crate::SemaphorePermit::release`].
    pub fn release(mut self) -> Result<u64> {
        match self.inner.take() {
            Some(permit) => self
                .bridge
                .run("semaphore release", async move { permit.release().await }),
            None => Ok(0),
        }
    }

    /// Keeps the permits taken for good (see [`crate::SemaphorePermit::forget`]).
    pub fn forget(mut self) {
        if let Some(permit) = self.inner.take() {
            permit.forget();
        }
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        if let Some(permit) = self.inner.take() {
            let _ = self
                .bridge
                .run("semaphore release", async move { permit.release().await });
        }
    }
}

//! The blocking counting semaphore and its permit.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::blocking_handle::Handle;
use crate::engine::bridge::Bridge;
use crate::error::Result;

/// A blocking [`crate::Semaphore`]. Each method's round trips, keys and
/// errors are those of the async method of the same name.
pub type Semaphore = Handle<crate::Semaphore>;

impl Handle<crate::Semaphore> {
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

    /// Blocks until a permit is free and takes it:
    /// [`acquire_many(1)`](Semaphore::acquire_many) (see [`crate::Semaphore::acquire`]).
    ///
    /// ```
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let url = server.url();
    /// let client = redlatch::blocking::Client::connect(&url)?;
    /// let pool = client.semaphore("printers");
    /// pool.try_set_permits(3)?;
    /// let one = pool.acquire()?;
    /// let two = pool.acquire_many(2)?;
    /// assert!(pool.try_acquire()?.is_none()); // all 3 taken
    /// drop(one); // given back before the drop returns
    /// assert_eq!(pool.available_permits()?, 1);
    /// two.release()?;
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many`].
    pub fn acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_many(1)
    }

    /// One attempt at one permit: [`try_acquire_many(1)`](Semaphore::try_acquire_many).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many`].
    pub fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        self.try_acquire_many(1)
    }

    /// Blocks for one permit as long as `wait` says:
    /// [`acquire_many_within(1, wait)`](Semaphore::acquire_many_within).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many_within`].
    pub fn acquire_within(&self, wait: Option<Duration>) -> Result<SemaphorePermit> {
        self.acquire_many_within(1, wait)
    }

    /// Blocks until `permits` are free and takes them all at once (see
    /// [`crate::Semaphore::acquire_many`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many`].
    pub fn acquire_many(&self, permits: u32) -> Result<SemaphorePermit> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("semaphore acquire", async move {
            sem.acquire_many(permits).await
        })?;
        Ok(self.permit(permit))
    }

    /// One attempt at `permits` (see [`crate::Semaphore::try_acquire_many`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_many`].
    pub fn try_acquire_many(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("semaphore acquire", async move {
            sem.try_acquire_many(permits).await
        })?;
        Ok(permit.map(|permit| self.permit(permit)))
    }

    /// Blocks for `permits` as long as `wait` says (see
    /// [`crate::Semaphore::acquire_many_within`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many_within`].
    pub fn acquire_many_within(
        &self,
        permits: u32,
        wait: Option<Duration>,
    ) -> Result<SemaphorePermit> {
        let sem = self.inner.clone();
        let permit = self.bridge.run("semaphore acquire", async move {
            sem.acquire_many_within(permits, wait).await
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

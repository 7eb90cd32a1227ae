//! The blocking count-down latch (`redlatch::blocking::CountDownLatch`).

use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use crate::error::Result;

/// A blocking [`crate::CountDownLatch`]: the same calls, which block the
/// calling thread. Each method's round trips, keys and errors are those of
/// the async method of the same name.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let started = client.count_down_latch("workers-started");
/// started.try_set_count(3)?;
/// let workers: Vec<_> = (0..3)
///     .map(|_| {
///         let started = started.clone();
///         std::thread::spawn(move || started.count_down())
///     })
///     .collect();
/// started.await_zero()?; // blocks until the third count down
/// for worker in workers {
///     worker.join().unwrap()?;
/// }
/// assert_eq!(started.count()?, 0);
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    bridge: Arc<Bridge>,
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, bridge: Arc<Bridge>) -> CountDownLatch {
        CountDownLatch { inner, bridge }
    }

    /// The latch's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the count if the latch has none (see [`crate::CountDownLatch::try_set_count`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        let latch = self.inner.clone();
        self.bridge.run("latch try_set_count", async move {
            latch.try_set_count(count).await
        })
    }

    /// Counts down by one (see [`crate::CountDownLatch::count_down`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<u64> {
        let latch = self.inner.clone();
        self.bridge
            .run("latch count_down", async move { latch.count_down().await })
    }

    /// The count now (see [`crate::CountDownLatch::count`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        let latch = self.inner.clone();
        self.bridge
            .run("latch count", async move { latch.count().await })
    }

    /// Deletes the latch, which opens it (see [`crate::CountDownLatch::delete`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::delete`].
    pub fn delete(&self) -> Result<bool> {
        let latch = self.inner.clone();
        self.bridge
            .run("latch delete", async move { latch.delete().await })
    }

    /// Blocks until the count is zero (see [`crate::CountDownLatch::await_zero`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::await_zero`].
    pub fn await_zero(&self) -> Result<()> {
        let latch = self.inner.clone();
        self.bridge
            .run("latch await", async move { latch.await_zero().await })
    }

    /// Blocks at most `wait` (`None`: as long as it takes) until the count
    /// is zero; returns whether it is (see [`crate::CountDownLatch::await_within`]).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::await_within`].
    pub fn await_within(&self, wait: Option<Duration>) -> Result<bool> {
        let latch = self.inner.clone();
        self.bridge
            .run("latch await", async move { latch.await_within(wait).await })
    }
}

//! The count-down latch's blocking calls (feature `blocking`): the one
//! blocking [`Handle`] over the async latch, whose methods block the
//! calling thread (`redlatch::blocking::CountDownLatch`). Written here, in
//! the latch's folder, on the engine's `Handle`: the blocking facade
//! names no latch.

use std::time::Duration;

use super::CountDownLatch;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`CountDownLatch`]: the same calls, which block the calling
/// thread. Each method's round trips, keys and errors are those of the
/// async method of the same name.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// use redlatch::CountDownLatch;
///
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let started = client.handle::<CountDownLatch>("workers-started");
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
impl Handle<CountDownLatch> {
    /// The latch's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the count if the latch has none (see [`CountDownLatch::try_set_count`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.run("latch try_set_count", |latch| async move {
            latch.try_set_count(count).await
        })
    }

    /// Counts down by one (see [`CountDownLatch::count_down`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<u64> {
        self.run("latch count_down", |latch| async move {
            latch.count_down().await
        })
    }

    /// The count now (see [`CountDownLatch::count`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        self.run("latch count", |latch| async move { latch.count().await })
    }

    /// Deletes the latch, which opens it (see [`CountDownLatch::delete`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::delete`].
    pub fn delete(&self) -> Result<bool> {
        self.run("latch delete", |latch| async move { latch.delete().await })
    }

    /// Blocks until the count is zero (see [`CountDownLatch::await_zero`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::await_zero`].
    pub fn await_zero(&self) -> Result<()> {
        self.run(
            "latch await",
            |latch| async move { latch.await_zero().await },
        )
    }

    /// Blocks at most `wait` (`None`: as long as it takes) until the count
    /// is zero; returns whether it is (see [`CountDownLatch::await_within`]).
    ///
    /// # Errors
    /// As [`CountDownLatch::await_within`].
    pub fn await_within(&self, wait: Option<Duration>) -> Result<bool> {
        self.run("latch await", |latch| async move {
            latch.await_within(wait).await
        })
    }
}

//! The two sides of a read-write lock as lock handles of their own: the
//! read side and the write side, each an [`AcquireLock`](crate::AcquireLock).

use std::time::Duration;

use super::ReadWriteLock;
use super::guard::{ReadGuard, WriteGuard};
use crate::error::Result;

/// The read side of a [`ReadWriteLock`], made by [`ReadWriteLock::reader`]:
/// its `acquire`, `try_acquire` and `acquire_timeout` are the lock's
/// [`read`](ReadWriteLock::read), [`try_read`](ReadWriteLock::try_read) and
/// [`read_timeout`](ReadWriteLock::read_timeout), so code written over
/// [`AcquireLock`](crate::AcquireLock) takes a reader like any lock. Many
/// read sides hold at once; none while a writer holds or waits.
///
/// It holds a clone of the lock (a few reference counts), with the lock's
/// owner, lease and place lease.
#[derive(Clone, Debug)]
pub struct ReadSide {
    lock: ReadWriteLock,
}

/// The write side of a [`ReadWriteLock`], made by [`ReadWriteLock::writer`]:
/// its `acquire`, `try_acquire` and `acquire_timeout` are the lock's
/// [`write`](ReadWriteLock::write), [`try_write`](ReadWriteLock::try_write)
/// and [`write_timeout`](ReadWriteLock::write_timeout), so code written over
/// [`AcquireLock`](crate::AcquireLock) takes the write lock like any
/// exclusive lock.
///
/// It holds a clone of the lock (a few reference counts), with the lock's
/// owner, lease and place lease.
#[derive(Clone, Debug)]
pub struct WriteSide {
    lock: ReadWriteLock,
}

// The sides are made here, next to their types: the lock's own file names
// no side, so this file stands above it.
impl ReadWriteLock {
    /// The read side as a lock handle of its own: a [`ReadSide`], whose
    /// `acquire`, `try_acquire` and `acquire_timeout` are [`read`](ReadWriteLock::read),
    /// [`try_read`](ReadWriteLock::try_read) and [`read_timeout`](ReadWriteLock::read_timeout).
    /// It is an [`AcquireLock`](crate::AcquireLock), so code written over that
    /// trait takes a reader like any lock. It holds a clone of this handle
    /// (owner, lease and place lease included): a few reference counts.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// use redlatch::{AcquireLock, HeldLock};
    ///
    /// /// One section under `lock`, of any kind.
    /// async fn section(lock: &impl AcquireLock) -> redlatch::Result<()> {
    ///     let held = lock.acquire().await?;
    ///     // ... the work ...
    ///     held.release().await
    /// }
    ///
    /// let lock = client.read_write_lock("catalog");
    /// section(&lock.reader()).await?;
    /// section(&lock.writer()).await?;
    ///
    /// let reading = lock.reader().acquire().await?;
    /// assert!(lock.reader().try_acquire().await?.is_some()); // readers share
    /// assert!(lock.writer().try_acquire().await?.is_none()); // not with a writer
    /// reading.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reader(&self) -> ReadSide {
        ReadSide::new(self.clone())
    }

    /// The write side as a lock handle of its own: a [`WriteSide`], whose
    /// `acquire`, `try_acquire` and `acquire_timeout` are [`write`](ReadWriteLock::write),
    /// [`try_write`](ReadWriteLock::try_write) and [`write_timeout`](ReadWriteLock::write_timeout),
    /// and an [`AcquireLock`](crate::AcquireLock) (see [`reader`](ReadWriteLock::reader)).
    /// It holds a clone of this handle: a few reference counts.
    pub fn writer(&self) -> WriteSide {
        WriteSide::new(self.clone())
    }
}

impl ReadSide {
    fn new(lock: ReadWriteLock) -> ReadSide {
        ReadSide { lock }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Waits to read: [`ReadWriteLock::read`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn acquire(&self) -> Result<ReadGuard> {
        self.lock.read().await
    }

    /// One attempt to read: [`ReadWriteLock::try_read`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_acquire(&self) -> Result<Option<ReadGuard>> {
        self.lock.try_read().await
    }

    /// Waits at most `wait` to read: [`ReadWriteLock::read_timeout`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::read_timeout`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<ReadGuard> {
        self.lock.read_timeout(wait).await
    }
}

impl WriteSide {
    fn new(lock: ReadWriteLock) -> WriteSide {
        WriteSide { lock }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Waits to write: [`ReadWriteLock::write`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::write`].
    pub async fn acquire(&self) -> Result<WriteGuard> {
        self.lock.write().await
    }

    /// One attempt to write: [`ReadWriteLock::try_write`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::write`].
    pub async fn try_acquire(&self) -> Result<Option<WriteGuard>> {
        self.lock.try_write().await
    }

    /// Waits at most `wait` to write: [`ReadWriteLock::write_timeout`].
    ///
    /// # Errors
    /// As [`ReadWriteLock::write_timeout`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::write`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<WriteGuard> {
        self.lock.write_timeout(wait).await
    }
}

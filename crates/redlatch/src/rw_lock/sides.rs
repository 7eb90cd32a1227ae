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

impl ReadSide {
    pub(super) fn new(lock: ReadWriteLock) -> ReadSide {
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
    pub(super) fn new(lock: ReadWriteLock) -> WriteSide {
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

//! The blocking read-write lock and its guards.

use std::time::Duration;

use super::guard::Guard;
use crate::LockStatus;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`crate::ReadWriteLock`]: many readers or one writer, and the
/// calling thread blocks while it waits. Each method's round trips, keys
/// and errors are those of the async method of the same name.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let lock = client.read_write_lock("price-list");
/// let first = lock.read()?;
/// let second = lock.clone().with_owner("other-reader").read()?; // readers share
/// assert!(lock.try_write()?.is_none()); // the writer waits for both
/// drop((first, second)); // each drop releases before it returns
/// let write = lock.write()?;
/// write.release()?;
/// # Ok::<(), redlatch::Error>(())
/// ```
pub type ReadWriteLock = Handle<crate::ReadWriteLock>;

impl Handle<crate::ReadWriteLock> {
    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same lock, held by the named owner (see [`crate::ReadWriteLock::with_owner`]).
    pub fn with_owner(self, owner: impl Into<String>) -> ReadWriteLock {
        self.map(|inner| inner.with_owner(owner))
    }

    /// The same lock with another claim lease for waiting writers (see
    /// [`crate::ReadWriteLock::with_place_lease`]).
    pub fn with_place_lease(self, lease: Duration) -> ReadWriteLock {
        self.map(|inner| inner.with_place_lease(lease))
    }

    /// The same lock with a fixed lease (see [`crate::ReadWriteLock::with_lease`]).
    pub fn with_lease(self, lease: Duration) -> ReadWriteLock {
        self.map(|inner| inner.with_lease(lease))
    }

    /// The read side as a blocking lock handle (see [`crate::ReadWriteLock::reader`]).
    pub fn reader(&self) -> Handle<crate::ReadSide> {
        Handle::new(self.inner.reader(), self.bridge.clone())
    }

    /// The write side as a blocking lock handle (see [`crate::ReadWriteLock::writer`]).
    pub fn writer(&self) -> Handle<crate::WriteSide> {
        Handle::new(self.inner.writer(), self.bridge.clone())
    }

    /// Blocks until a read hold is taken (see [`crate::ReadWriteLock::read`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::read`].
    pub fn read(&self) -> Result<ReadGuard> {
        self.reader().acquire()
    }

    /// One attempt at a read hold (see [`crate::ReadWriteLock::try_read`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_read`].
    pub fn try_read(&self) -> Result<Option<ReadGuard>> {
        self.reader().try_acquire()
    }

    /// Blocks for a read hold as long as `wait` says (see
    /// [`crate::ReadWriteLock::read_within`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::read_within`].
    pub fn read_within(&self, wait: Option<Duration>) -> Result<ReadGuard> {
        self.reader().acquire_within(wait)
    }

    /// Blocks until the write hold is taken (see [`crate::ReadWriteLock::write`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::write`].
    pub fn write(&self) -> Result<WriteGuard> {
        self.writer().acquire()
    }

    /// One attempt at the write hold (see [`crate::ReadWriteLock::try_write`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::try_write`].
    pub fn try_write(&self) -> Result<Option<WriteGuard>> {
        self.writer().try_acquire()
    }

    /// Blocks for the write hold as long as `wait` says (see
    /// [`crate::ReadWriteLock::write_within`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::write_within`].
    pub fn write_within(&self, wait: Option<Duration>) -> Result<WriteGuard> {
        self.writer().acquire_within(wait)
    }

    /// Mode, holders and waiters (see [`crate::ReadWriteLock::status`]).
    ///
    /// # Errors
    /// As [`crate::ReadWriteLock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        let lock = self.inner.clone();
        self.bridge
            .run("status", async move { lock.status().await })
    }
}

/// A blocking [`crate::ReadGuard`]: the blocking [`Guard`] of one read
/// hold. Dropping it releases the hold before the drop returns;
/// [`release`](Guard::release) does the same and reports errors.
pub type ReadGuard = Guard<crate::ReadGuard>;

/// A blocking [`crate::WriteGuard`]: the blocking [`Guard`] of the write
/// hold. Dropping it releases the hold before the drop returns;
/// [`release`](Guard::release) does the same and reports errors.
pub type WriteGuard = Guard<crate::WriteGuard>;

impl Guard<crate::ReadGuard> {
    /// The hash field of this hold (see [`crate::ReadGuard::owner`]).
    pub fn owner(&self) -> &str {
        self.get().owner()
    }
}

impl Guard<crate::WriteGuard> {
    /// The hash field of this hold (see [`crate::WriteGuard::owner`]).
    pub fn owner(&self) -> &str {
        self.get().owner()
    }

    /// Turns the write hold into a read hold with no writer in between (see
    /// [`crate::WriteGuard::downgrade`]).
    ///
    /// # Errors
    /// As [`crate::WriteGuard::downgrade`].
    pub fn downgrade(self) -> Result<ReadGuard> {
        let (write, bridge) = self.take();
        let read = bridge.run("downgrade", write.downgrade())?;
        Ok(Guard::new(read, bridge))
    }
}

//! The two sides of a read-write lock as lock handles of their own: the
//! read side and the write side, each an [`AcquireLock`](crate::AcquireLock).

use std::future::Future;
use std::time::Duration;

use super::ReadWriteLock;
use super::guard::{ReadGuard, WriteGuard};
use crate::error::Result;

/// The read side of a [`ReadWriteLock`], made by [`ReadWriteLock::reader`]:
/// its `acquire`, `try_acquire` and `acquire_within` are the lock's
/// [`read`](ReadWriteLock::read), [`try_read`](ReadWriteLock::try_read) and
/// [`read_within`](ReadWriteLock::read_within), so code written over
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
/// its `acquire`, `try_acquire` and `acquire_within` are the lock's
/// [`write`](ReadWriteLock::write), [`try_write`](ReadWriteLock::try_write)
/// and [`write_within`](ReadWriteLock::write_within), so code written over
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
    /// `acquire`, `try_acquire` and `acquire_within` are [`read`](ReadWriteLock::read),
    /// [`try_read`](ReadWriteLock::try_read) and [`read_within`](ReadWriteLock::read_within).
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
    /// `acquire`, `try_acquire` and `acquire_within` are [`write`](ReadWriteLock::write),
    /// [`try_write`](ReadWriteLock::try_write) and [`write_within`](ReadWriteLock::write_within),
    /// and an [`AcquireLock`](crate::AcquireLock) (see [`reader`](ReadWriteLock::reader)).
    /// It holds a clone of this handle: a few reference counts.
    pub fn writer(&self) -> WriteSide {
        WriteSide::new(self.clone())
    }
}

/// The methods of a side `$side` whose acquires are the lock's `$wait`,
/// `$try` and `$within`, returning `$guard`.
macro_rules! side {
    ($side:ident, $guard:ty, $wait:ident, $try:ident, $within:ident) => {
        impl $side {
            fn new(lock: ReadWriteLock) -> $side {
                $side { lock }
            }

            /// The lock's name, without the key prefix.
            pub fn name(&self) -> &str {
                self.lock.name()
            }

            /// The same side with a fixed lease on its holds (see
            /// [`ReadWriteLock::with_lease`]).
            pub fn with_lease(self, lease: Duration) -> $side {
                $side::new(self.lock.with_lease(lease))
            }

            #[doc = concat!("Waits: [`ReadWriteLock::", stringify!($wait), "`].")]
            ///
            /// # Errors
            #[doc = concat!("As [`ReadWriteLock::", stringify!($wait), "`].")]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`ReadWriteLock::", stringify!($wait), "`].")]
            pub fn acquire(&self) -> impl Future<Output = Result<$guard>> + Send + '_ {
                self.lock.$wait()
            }

            #[doc = concat!("One attempt: [`ReadWriteLock::", stringify!($try), "`].")]
            ///
            /// # Errors
            #[doc = concat!("As [`ReadWriteLock::", stringify!($try), "`].")]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`ReadWriteLock::", stringify!($wait), "`].")]
            pub fn try_acquire(&self) -> impl Future<Output = Result<Option<$guard>>> + Send + '_ {
                self.lock.$try()
            }

            #[doc = concat!("Waits as long as `wait` says: [`ReadWriteLock::", stringify!($within), "`].")]
            ///
            /// # Errors
            #[doc = concat!("As [`ReadWriteLock::", stringify!($within), "`].")]
            ///
            /// # Cancel safety
            #[doc = concat!("As [`ReadWriteLock::", stringify!($wait), "`].")]
            pub fn acquire_within(
                &self,
                wait: Option<Duration>,
            ) -> impl Future<Output = Result<$guard>> + Send + '_ {
                self.lock.$within(wait)
            }
        }
    };
}

side!(ReadSide, ReadGuard, read, try_read, read_within);
side!(WriteSide, WriteGuard, write, try_write, write_within);

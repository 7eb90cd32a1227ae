//! The guards of a read-write lock: one read hold, or the write hold.

use std::future::Future;
use std::time::Duration;

use crate::base::guard::Guard;
use crate::engine::hold::LostReason;
use crate::error::Result;

/// One read hold on a [`ReadWriteLock`](crate::ReadWriteLock); other readers
/// may hold it at the same time, writers may not. Released on drop; the
/// watchdog renews it meanwhile. The methods are those of [`Guard`].
#[must_use = "dropping a guard releases the lock at once"]
#[derive(Debug)]
pub struct ReadGuard {
    guard: Guard,
}

/// The write hold on a [`ReadWriteLock`](crate::ReadWriteLock): nobody else
/// reads or writes while it lives. Released on drop; the watchdog renews it
/// meanwhile. The methods are those of [`Guard`], plus
/// [`downgrade`](WriteGuard::downgrade).
#[must_use = "dropping a guard releases the lock at once"]
#[derive(Debug)]
pub struct WriteGuard {
    guard: Guard,
}

macro_rules! guard_accessors {
    () => {
        /// The fencing token, strictly increasing per lock name across all
        /// clients and every kind of lock on it (see [`Guard::token`]).
        /// Each reader's first hold gets a token of its own.
        pub fn token(&self) -> u64 {
            self.guard.token()
        }

        /// The lock's name, without the key prefix.
        pub fn name(&self) -> &str {
            self.guard.name()
        }

        /// The hash field of this hold: `<client-id>:<owner>` for a read,
        /// `<client-id>:<owner>:write` for the write.
        pub fn owner(&self) -> &str {
            self.guard.owner()
        }

        /// The lease, renewed by the watchdog.
        pub fn lease(&self) -> Duration {
            self.guard.lease()
        }

        /// True while the hold is known to be held (see [`Guard::is_held`]).
        pub fn is_held(&self) -> bool {
            self.guard.is_held()
        }

        /// Resolves when the hold is known to be lost (see [`Guard::lost`]).
        pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
            self.guard.lost()
        }

        /// Why the hold is no longer held; `None` while held.
        pub fn lost_reason(&self) -> Option<LostReason> {
            self.guard.lost_reason()
        }

        /// Gives this hold back. One round trip; see [`Guard::release`].
        ///
        /// # Errors
        /// [`Error::NotHeld`](crate::Error::NotHeld) when it was lost
        /// meanwhile; connection errors.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the release: it runs to its end in the background.
        pub async fn release(self) -> Result<()> {
            self.guard.release().await
        }
    };
}

impl ReadGuard {
    pub(crate) fn new(guard: Guard) -> ReadGuard {
        ReadGuard { guard }
    }

    guard_accessors!();

    /// Takes one more read hold for the same owner (hold count + 1, one more
    /// timeout key), even while a writer waits. One round trip.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the owner no longer
    /// reads; connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future gives back a hold it may have taken.
    pub async fn reenter(&self) -> Result<ReadGuard> {
        Ok(ReadGuard::new(self.guard.reenter().await?))
    }
}

impl WriteGuard {
    pub(crate) fn new(guard: Guard) -> WriteGuard {
        WriteGuard { guard }
    }

    guard_accessors!();

    /// Takes one more write hold for the same owner. One round trip.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the owner no longer
    /// writes; connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future gives back a hold it may have taken.
    pub async fn reenter(&self) -> Result<WriteGuard> {
        Ok(WriteGuard::new(self.guard.reenter().await?))
    }

    /// Turns this write hold into a read hold without letting another writer
    /// in between: takes a read hold for the same owner (allowed while it
    /// writes), then releases this write hold. Other readers may enter from
    /// then on. Two round trips. Other write holds of the same owner
    /// (re-entries) keep writing until they are released.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the write lock was lost
    /// (then no read hold is kept); connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the write hold and a read hold both
    /// released, or the write hold released by its guard's drop: never a
    /// hold without a guard.
    pub async fn downgrade(self) -> Result<ReadGuard> {
        Ok(ReadGuard::new(
            crate::rw_lock::register::downgrade(self.guard).await?,
        ))
    }
}

//! [`AcquireLock`]: a handle that hands out holds.

use std::future::Future;
use std::time::Duration;

use super::held_lock::HeldLock;
use crate::base::guard::Guard;
use crate::error::Result;
use crate::fair_lock::FairLock;
use crate::lock::Lock;
use crate::redlock::{RedlockGuard, RedlockLock};
use crate::rw_lock::guard::{ReadGuard, WriteGuard};
use crate::rw_lock::sides::{ReadSide, WriteSide};
use crate::semaphore::permit::{ExpirablePermit, PermitSemaphore};
use crate::spin_lock::SpinLock;
use crate::token_lock::{TokenGuard, TokenLock};

/// A handle to something held by one owner at a time, by N for a permit
/// semaphore, or by many readers for a read-write lock's read side:
/// [`Lock`], [`FairLock`], [`SpinLock`], [`TokenLock`], [`RedlockLock`], [`PermitSemaphore`],
/// and a [`ReadWriteLock`](crate::ReadWriteLock)'s [`WriteSide`] and
/// [`ReadSide`] ([`writer`](crate::ReadWriteLock::writer),
/// [`reader`](crate::ReadWriteLock::reader)).
/// It has one acquire shape, the same on every kind: a fixed lease set on
/// the handle ([`with_lease`](AcquireLock::with_lease); without one the
/// watchdog renews the client's default lease), and three ways to acquire,
/// [`acquire`](AcquireLock::acquire) (waits as the client's
/// [`wait_timeout`](crate::Settings::wait_timeout) says: until held by
/// default), [`try_acquire`](AcquireLock::try_acquire) (one attempt) and
/// [`acquire_within`](AcquireLock::acquire_within) (`None`: until held;
/// `Some(d)`: at most `d`). They are the handle's own methods of the same
/// name; what differs between the kinds is only who gets it next (any
/// waiter, the first in line, a majority of masters' choice, any of N, every
/// reader once no writer holds or waits).
///
/// Generic code that needs a fencing token asks for a [`Fenced`](crate::Fenced)
/// guard: every lock's guard is but a [`TokenGuard`] (fenced only where asked,
/// [`TokenGuard::fencing_token`]), a permit is not.
///
/// ```
/// use redlatch::{AcquireLock, Fenced, HeldLock};
///
/// /// Runs one section under `lock`, of any kind; returns its fencing token.
/// async fn exclusively<L>(lock: &L) -> redlatch::Result<u64>
/// where
///     L: AcquireLock,
///     L::Guard: Fenced,
/// {
///     let guard = lock.acquire().await?;
///     let token = guard.token();
///     // ... the work, each write stamped with `token` ...
///     guard.release().await?;
///     Ok(token)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let masters = testkit::Servers::start(3).unwrap();
/// # let urls = masters.urls();
/// # let url = urls[0].clone();
/// let client = redlatch::Client::connect(&url).await?;     // one server
/// let redlock = redlatch::Redlock::connect(&urls).await?;  // several masters
///
/// let first = exclusively(&client.lock("report")).await?;
/// assert!(exclusively(&client.lock("report")).await? > first);
/// assert!(exclusively(&redlock.lock("report")).await? >= 1);
/// # Ok(())
/// # }
/// ```
pub trait AcquireLock {
    /// What an acquire holds.
    type Guard: HeldLock;

    /// The name, without the key prefix.
    fn name(&self) -> &str;

    /// The same handle, whose holds have a fixed `lease` that is not
    /// renewed (checked when the handle is used:
    /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) unless
    /// 1 ms ≤ `lease` ≤ 30 days).
    fn with_lease(self, lease: Duration) -> Self
    where
        Self: Sized;

    /// Waits until held (woken by the release of the holder, not by
    /// polling), or for at most the client's
    /// [`wait_timeout`](crate::Settings::wait_timeout) when it is set:
    /// `acquire_within(wait_timeout)`.
    ///
    /// # Errors
    /// Connection errors, and those of the handle's own `acquire`.
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing held, nor waiting, in Redis.
    fn acquire(&self) -> impl Future<Output = Result<Self::Guard>> + Send;

    /// One attempt: `None` when it is held elsewhere.
    ///
    /// # Errors
    /// As [`acquire`](AcquireLock::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](AcquireLock::acquire).
    fn try_acquire(&self) -> impl Future<Output = Result<Option<Self::Guard>>> + Send;

    /// Waits until held (`None`) or at most `wait` (`Some`; a zero wait
    /// makes one attempt, and "held elsewhere" is then an error).
    ///
    /// # Errors
    /// [`Error::Timeout`](crate::Error::Timeout) when `wait` runs out
    /// ([`Error::NoPermits`](crate::Error::NoPermits) for a permit); as
    /// [`acquire`](AcquireLock::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](AcquireLock::acquire).
    fn acquire_within(
        &self,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Self::Guard>> + Send;
}

/// `AcquireLock` for a handle whose inherent methods have the trait's names.
macro_rules! acquire_lock {
    ($($handle:ty => $guard:ty),+) => {$(
        impl AcquireLock for $handle {
            type Guard = $guard;

            fn name(&self) -> &str {
                <$handle>::name(self)
            }

            fn with_lease(self, lease: Duration) -> $handle {
                <$handle>::with_lease(self, lease)
            }

            fn acquire(&self) -> impl Future<Output = Result<$guard>> + Send {
                <$handle>::acquire(self)
            }

            fn try_acquire(&self) -> impl Future<Output = Result<Option<$guard>>> + Send {
                <$handle>::try_acquire(self)
            }

            fn acquire_within(
                &self,
                wait: Option<Duration>,
            ) -> impl Future<Output = Result<$guard>> + Send {
                <$handle>::acquire_within(self, wait)
            }
        }
    )+};
}

acquire_lock!(
    Lock => Guard,
    FairLock => Guard,
    SpinLock => Guard,
    TokenLock => TokenGuard,
    RedlockLock => RedlockGuard,
    PermitSemaphore => ExpirablePermit,
    ReadSide => ReadGuard,
    WriteSide => WriteGuard
);

//! [`ExtendLease`]: a hold whose lease its holder sets again.

use std::future::Future;
use std::time::Duration;

use super::held_lock::HeldLock;
use crate::error::Result;
use crate::redlock::RedlockGuard;

/// A hold whose lease can be set again by hand, for fixed-lease holds that
/// need more time: [`RedlockGuard`].
///
/// The other guards are kept by the watchdog, or by a fixed lease chosen at
/// acquire: they offer no extend.
///
/// ```
/// use std::time::Duration;
/// use redlatch::ExtendLease;
///
/// /// Gives a slow job another `more` of lease before each step.
/// async fn step(guard: &impl ExtendLease, more: Duration) -> redlatch::Result<()> {
///     guard.extend(more).await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let masters = testkit::Servers::start(3).unwrap();
/// # let urls = masters.urls();
/// let redlock = redlatch::Redlock::connect(&urls).await?;
/// let lock = redlock.lock("migration").with_lease(Duration::from_secs(5));
/// let guard = lock.acquire().await?;
/// step(&guard, Duration::from_secs(20)).await?;
/// assert_eq!(guard.lease(), Duration::from_secs(20));
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
pub trait ExtendLease: HeldLock {
    /// Sets the lease to `lease` from now, where the hold is kept. Counts
    /// only when confirmed (on a majority, for Redlock) before the current
    /// lease ends.
    ///
    /// # Errors
    /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) unless
    /// 1 ms ≤ `lease` ≤ 30 days; [`Error::NotHeld`](crate::Error::NotHeld)
    /// when it is no longer held; [`Error::QuorumFailed`](crate::Error::QuorumFailed)
    /// when too few masters answered in time (the old lease stands).
    ///
    /// # Cancel safety
    /// Dropping the future may leave the lease extended on some servers; the
    /// guard's own view moves only on a confirmation.
    fn extend(&self, lease: Duration) -> impl Future<Output = Result<()>> + Send;
}

impl ExtendLease for RedlockGuard {
    fn extend(&self, lease: Duration) -> impl Future<Output = Result<()>> + Send {
        RedlockGuard::extend(self, lease)
    }
}

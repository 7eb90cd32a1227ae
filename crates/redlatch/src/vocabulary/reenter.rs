//! [`Reenter`]: one more hold for the same owner.

use std::future::Future;

use super::held_lock::HeldLock;
use crate::base::guard::Guard;
use crate::error::Result;
use crate::redlock::RedlockGuard;
use crate::rw_lock::guard::{ReadGuard, WriteGuard};

/// A reentrant hold: [`Guard`], [`ReadGuard`], [`WriteGuard`],
/// [`RedlockGuard`]. The lock is released when every guard of the owner is.
///
/// ```
/// use redlatch::{HeldLock, Reenter};
///
/// /// Runs a nested section under the same hold: its guard goes, the hold stays.
/// async fn nested(guard: &impl Reenter) -> redlatch::Result<()> {
///     let inner = guard.reenter().await?;
///     inner.release().await
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::Client::connect(&url).await?;
/// let guard = client.lock("ledger").acquire().await?;
/// nested(&guard).await?;
/// assert!(guard.is_held());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
pub trait Reenter: HeldLock + Sized {
    /// Takes one more hold for the same owner: the hold count goes up by
    /// one, the new guard has the same token.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when the owner no longer
    /// holds it; connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future gives back a hold it may have taken.
    fn reenter(&self) -> impl Future<Output = Result<Self>> + Send;
}

/// `Reenter` for a type with an inherent `reenter`.
macro_rules! reenter {
    ($($held:ty),+) => {$(
        impl Reenter for $held {
            fn reenter(&self) -> impl Future<Output = Result<Self>> + Send {
                <$held>::reenter(self)
            }
        }
    )+};
}

reenter!(Guard, ReadGuard, WriteGuard, RedlockGuard);

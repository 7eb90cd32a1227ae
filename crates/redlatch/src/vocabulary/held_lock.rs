//! [`HeldLock`]: what every held thing offers, a lock's hold or a permit.

use std::future::Future;

use crate::base::guard::Guard;
use crate::engine::hold::LostReason;
use crate::error::Result;
use crate::redlock::RedlockGuard;
use crate::rw_lock::guard::{ReadGuard, WriteGuard};
use crate::semaphore::permit::ExpirablePermit;
use crate::token_lock::TokenGuard;

/// Something held in Redis under a lease: a lock's hold ([`Guard`],
/// [`ReadGuard`], [`WriteGuard`], [`RedlockGuard`], [`TokenGuard`]) or a permit
/// ([`ExpirablePermit`]). It stays held, renewed by the watchdog, until it
/// is released or dropped (which releases it in the background), or lost.
///
/// Each method is the type's own method of the same name. A
/// [`MultiGuard`](crate::MultiGuard) holds several locks, each with a name
/// of its own: it implements none of these traits, and its
/// [`guards`](crate::MultiGuard::guards) each implement them all.
///
/// ```
/// use redlatch::HeldLock;
///
/// /// Waits until `held` is lost, or says it was still held after `limit`.
/// async fn outlives(held: &impl HeldLock, limit: std::time::Duration) -> bool {
///     tokio::time::timeout(limit, held.lost()).await.is_err() && held.is_held()
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::Client::connect(&url).await?;
/// let guard = client.lock("nightly-export").acquire().await?;
/// let permits = client.permit_semaphore("exporters");
/// permits.try_set_permits(2).await?;
/// let permit = permits.acquire().await?;
///
/// let limit = std::time::Duration::from_millis(20);
/// assert!(outlives(&guard, limit).await && outlives(&permit, limit).await);
/// assert_eq!((guard.name(), HeldLock::name(&permit)), ("nightly-export", "exporters"));
/// guard.release().await?;
/// HeldLock::release(permit).await?;
/// # Ok(())
/// # }
/// ```
pub trait HeldLock {
    /// The name it was acquired under (a lock's or a semaphore's), without
    /// the key prefix.
    fn name(&self) -> &str;

    /// True while it is known to be held: no renewal found it gone, and its
    /// lease (minus a drift margin) has not run out since the last confirmed
    /// acquire or renewal.
    fn is_held(&self) -> bool;

    /// Resolves when it is known to be lost (found gone by a renewal, Redis
    /// out of reach until the lease ran out, a fixed lease run out); never
    /// while it is held. The future owns what it needs: move it into a task
    /// or a `select!`.
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static;

    /// Why it is no longer held, once it is not; `None` while held.
    fn lost_reason(&self) -> Option<LostReason>;

    /// Gives it back now and says whether it was still held.
    ///
    /// # Errors
    /// [`Error::NotHeld`](crate::Error::NotHeld) when it was lost meanwhile
    /// (the work done under it may have overlapped with another holder);
    /// connection errors, after which it runs out with its lease.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: it runs to its end in
    /// the background.
    fn release(self) -> impl Future<Output = Result<()>> + Send;
}

/// `HeldLock` for a type whose inherent methods have the trait's names.
macro_rules! held_lock {
    ($($held:ty),+) => {$(
        impl HeldLock for $held {
            fn name(&self) -> &str {
                <$held>::name(self)
            }

            fn is_held(&self) -> bool {
                <$held>::is_held(self)
            }

            fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
                <$held>::lost(self)
            }

            fn lost_reason(&self) -> Option<LostReason> {
                <$held>::lost_reason(self)
            }

            fn release(self) -> impl Future<Output = Result<()>> + Send {
                <$held>::release(self)
            }
        }
    )+};
}

held_lock!(
    Guard,
    ReadGuard,
    WriteGuard,
    RedlockGuard,
    ExpirablePermit,
    TokenGuard
);

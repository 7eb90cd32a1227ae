//! [`Fenced`]: a hold that carries a fencing token.

use super::held_lock::HeldLock;
use crate::base::guard::Guard;
use crate::redlock::RedlockGuard;
use crate::rw_lock::guard::{ReadGuard, WriteGuard};

/// A lock's hold, with the fencing token of its acquisition: [`Guard`],
/// [`ReadGuard`], [`WriteGuard`], [`RedlockGuard`].
///
/// A permit ([`ExpirablePermit`](crate::ExpirablePermit)) has no token: a
/// semaphore lets several holders in at once, so there is no order of
/// holders for a token to keep.
///
/// ```
/// use redlatch::Fenced;
///
/// /// The write a fenced store accepts: only with a token above the last one it saw.
/// fn stamp(guard: &impl Fenced, value: &str) -> String {
///     format!("{}={value}@{}", guard.name(), guard.token())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::Client::connect(&url).await?;
/// let first = client.lock("price").acquire().await?;
/// assert_eq!(stamp(&first, "10"), format!("price=10@{}", first.token()));
/// let token = first.token();
/// first.release().await?;
/// let write = client.read_write_lock("price").write().await?;
/// assert!(write.token() > token); // one counter per name, whatever the kind of lock
/// # Ok(())
/// # }
/// ```
pub trait Fenced: HeldLock {
    /// The fencing token: strictly increasing per lock name across every
    /// acquisition, so a resource that remembers the highest token it
    /// accepted can refuse writes from a holder that lost the lock.
    /// Re-entries share the token of the hold they re-enter.
    fn token(&self) -> u64;
}

/// `Fenced` for a type with an inherent `token`.
macro_rules! fenced {
    ($($held:ty),+) => {$(
        impl Fenced for $held {
            fn token(&self) -> u64 {
                <$held>::token(self)
            }
        }
    )+};
}

fenced!(Guard, ReadGuard, WriteGuard, RedlockGuard);

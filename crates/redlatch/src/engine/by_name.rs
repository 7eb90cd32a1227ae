//! How a client makes any primitive from a name: [`Primitive`], which each
//! primitive implements in its own folder, so that `Client::handle::<P>`
//! and `blocking::Client::handle::<P>` make a new primitive with no edit in
//! the client or in the blocking facade.

use std::sync::Arc;

use crate::engine::context::Core;

/// A handle a client makes from a name alone, with
/// [`Client::handle`](crate::Client::handle) (and, with the `blocking`
/// feature, `blocking::Client::handle`): no round trip, the name is checked
/// when the handle is used.
///
/// Implemented by [`CountDownLatch`](crate::CountDownLatch),
/// [`FairLock`](crate::FairLock), [`ReadWriteLock`](crate::ReadWriteLock),
/// [`Semaphore`](crate::Semaphore), [`PermitSemaphore`](crate::PermitSemaphore)
/// and [`TokenLock`](crate::TokenLock); each also has a method of its own
/// name on the client (`client.count_down_latch(name)` is
/// `client.handle::<CountDownLatch>(name)`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// use redlatch::CountDownLatch;
///
/// let latch = client.handle::<CountDownLatch>("shards-loaded");
/// assert!(latch.try_set_count(1).await?);
/// assert_eq!(client.count_down_latch("shards-loaded").count().await?, 1);
/// # Ok(())
/// # }
/// ```
pub trait Primitive: Sized {
    /// The handle `name` on the state the client shares with everything it
    /// makes. Called by the client; the state is opaque outside the crate.
    #[doc(hidden)]
    fn from_client(state: ClientState, name: String) -> Self;
}

/// What a client lends each primitive it makes: the state its clones share
/// (connection, settings, watchdog, wake-ups). Opaque outside the crate.
#[doc(hidden)]
pub struct ClientState {
    pub(crate) core: Arc<Core>,
}

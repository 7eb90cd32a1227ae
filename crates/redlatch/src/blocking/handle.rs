//! The one blocking lock handle, written once over [`AcquireLock`]: every
//! blocking lock ([`Lock`](super::Lock), [`FairLock`](super::FairLock),
//! [`SpinLock`](super::SpinLock), [`PermitSemaphore`](super::PermitSemaphore),
//! a read-write lock's sides) is a [`Handle`] over its async handle, plus
//! the few methods of its own kind.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use super::guard::Guard;
use crate::error::Result;
use crate::vocabulary::AcquireLock;

/// A blocking lock handle: the async handle `L`, with the acquire shape of
/// [`AcquireLock`] in methods that block the calling thread. Each method's
/// round trips, keys and errors are those of the async method of the same
/// name; acquires return the blocking [`Guard`], which releases on drop.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// use std::time::Duration;
///
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let lock = client.fair_lock("print-queue").with_lease(Duration::from_secs(10));
/// let guard = lock.acquire()?;                            // a 10 s lease, not renewed
/// assert!(lock.try_acquire()?.is_none());                  // one attempt
/// let busy = lock.acquire_within(Some(Duration::from_millis(50)));
/// assert!(matches!(busy, Err(redlatch::Error::Timeout { .. })));
/// guard.release()?;
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Handle<L> {
    inner: L,
    bridge: Arc<Bridge>,
}

impl<L> Handle<L> {
    pub(super) fn new(inner: L, bridge: Arc<Bridge>) -> Handle<L> {
        Handle { inner, bridge }
    }

    pub(super) fn parts(&self) -> (&L, &Arc<Bridge>) {
        (&self.inner, &self.bridge)
    }

    /// The same handle, its async handle changed by `change` (a builder method).
    pub(super) fn map(self, change: impl FnOnce(L) -> L) -> Handle<L> {
        Handle {
            inner: change(self.inner),
            bridge: self.bridge,
        }
    }

    /// Blocks on `call` of a clone of the async handle; `op` names the call
    /// should the runtime be gone.
    pub(super) fn run<T, F, Fut>(&self, op: &'static str, call: F) -> Result<T>
    where
        L: Clone,
        T: Send + 'static,
        F: FnOnce(L) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        self.bridge.run(op, call(self.inner.clone()))
    }
}

impl<L> Handle<L>
where
    L: AcquireLock + Clone + Send + Sync + 'static,
    L::Guard: Send + 'static,
{
    /// The name, without the key prefix.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same handle, whose holds have a fixed `lease` that the watchdog
    /// does not renew (see [`AcquireLock::with_lease`]): every acquire of
    /// the handle takes that lease.
    pub fn with_lease(self, lease: Duration) -> Handle<L> {
        self.map(|inner| inner.with_lease(lease))
    }

    /// Blocks until held, or for at most the client's wait timeout when it
    /// is set (see [`AcquireLock::acquire`]).
    ///
    /// # Errors
    /// As the async handle's `acquire`.
    pub fn acquire(&self) -> Result<Guard<L::Guard>> {
        let held = self.run("acquire", |inner| async move { inner.acquire().await })?;
        Ok(Guard::new(held, self.bridge.clone()))
    }

    /// One attempt (see [`AcquireLock::try_acquire`]).
    ///
    /// # Errors
    /// As the async handle's `try_acquire`.
    pub fn try_acquire(&self) -> Result<Option<Guard<L::Guard>>> {
        let held = self.run("acquire", |inner| async move { inner.try_acquire().await })?;
        Ok(held.map(|held| Guard::new(held, self.bridge.clone())))
    }

    /// Blocks until held (`None`) or at most `wait` (see
    /// [`AcquireLock::acquire_within`]).
    ///
    /// # Errors
    /// As the async handle's `acquire_within`.
    pub fn acquire_within(&self, wait: Option<Duration>) -> Result<Guard<L::Guard>> {
        let held = self.run("acquire", move |inner| async move {
            inner.acquire_within(wait).await
        })?;
        Ok(Guard::new(held, self.bridge.clone()))
    }
}

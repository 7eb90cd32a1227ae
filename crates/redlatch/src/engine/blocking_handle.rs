//! The blocking handle: an async handle and the runtime its calls block
//! on. Below the primitives, so that each primitive's folder writes its own
//! blocking methods (`impl Handle<ItsHandle>`) beside its async ones; the
//! blocking facade writes those every lock shares (`blocking/handle.rs`).

use std::future::Future;
use std::sync::Arc;

use crate::engine::bridge::Bridge;
use crate::error::Result;

/// A blocking handle: the async handle `L`, with methods that block the
/// calling thread. Each method's round trips, keys and errors are those of
/// the async method of the same name. For a lock (an
/// [`AcquireLock`](crate::AcquireLock)) the acquires return the blocking
/// [`Guard`](crate::blocking::Guard), which releases on drop; every other
/// primitive has its own calls (a [`CountDownLatch`](crate::CountDownLatch)'s
/// `count_down`, `await_zero`...).
///
/// `blocking::Client::handle::<P>(name)` makes one for any
/// [`Primitive`](crate::Primitive) `P`.
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
    pub(crate) inner: L,
    pub(crate) bridge: Arc<Bridge>,
}

impl<L> Handle<L> {
    pub(crate) fn new(inner: L, bridge: Arc<Bridge>) -> Handle<L> {
        Handle { inner, bridge }
    }

    pub(crate) fn parts(&self) -> (&L, &Arc<Bridge>) {
        (&self.inner, &self.bridge)
    }

    /// The same handle, its async handle changed by `change` (a builder method).
    pub(crate) fn map(self, change: impl FnOnce(L) -> L) -> Handle<L> {
        Handle {
            inner: change(self.inner),
            bridge: self.bridge,
        }
    }

    /// Blocks on `call` of a clone of the async handle; `op` names the call
    /// should the runtime be gone.
    pub(crate) fn run<T, F, Fut>(&self, op: &'static str, call: F) -> Result<T>
    where
        L: Clone,
        T: Send + 'static,
        F: FnOnce(L) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        self.bridge.run(op, call(self.inner.clone()))
    }
}

//! The blocking guard: any async hold, released on drop before the drop returns.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::bridge::Bridge;
use crate::engine::hold::LostReason;
use crate::error::Result;
use crate::vocabulary::{Fenced, HeldLock, Reenter};

/// A blocking hold: the async hold `G` ([`crate::Guard`] by default,
/// [`ReadGuard`](super::ReadGuard), [`WriteGuard`](super::WriteGuard) and
/// [`ExpirablePermit`](super::ExpirablePermit) for the others), with methods
/// that block. Dropping it releases the hold before the drop returns;
/// [`release`](Guard::release) does the same and reports errors.
///
/// Each method is that of the async hold (see [`HeldLock`], [`Fenced`],
/// [`Reenter`]): its round trips, keys and errors are the same.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let guard: redlatch::blocking::Guard = client.lock("nightly-report").acquire()?;
/// assert!(guard.is_held() && guard.token() >= 1);
/// let again = guard.reenter()?; // same owner, same token
/// assert_eq!(again.token(), guard.token());
/// drop(again);                  // the lock stays held by `guard`
/// guard.release()?;
/// # Ok::<(), redlatch::Error>(())
/// ```
#[must_use = "dropping a guard releases what it holds at once"]
#[derive(Debug)]
pub struct Guard<G: HeldLock + Send + 'static = crate::Guard> {
    /// `None` once released.
    inner: Option<G>,
    bridge: Arc<Bridge>,
}

impl<G: HeldLock + Send + 'static> Guard<G> {
    pub(super) fn new(inner: G, bridge: Arc<Bridge>) -> Guard<G> {
        Guard {
            inner: Some(inner),
            bridge,
        }
    }

    pub(super) fn get(&self) -> &G {
        self.inner.as_ref().expect("a guard is released only once")
    }

    /// Takes the async hold out, for a call that consumes it.
    pub(super) fn take(mut self) -> (G, Arc<Bridge>) {
        let inner = self.inner.take().expect("a guard is released only once");
        (inner, self.bridge.clone())
    }

    /// The name it was acquired under, without the key prefix.
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// True while it is known to be held (see [`HeldLock::is_held`]).
    pub fn is_held(&self) -> bool {
        self.get().is_held()
    }

    /// Why it is no longer held, once it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.get().lost_reason()
    }

    /// Blocks until it is known to be lost or `limit` passes; returns
    /// whether it was lost (the blocking form of [`HeldLock::lost`]).
    pub fn wait_lost(&self, limit: Duration) -> bool {
        let lost = self.get().lost();
        self.bridge
            .run("wait lost", async move {
                Ok(tokio::time::timeout(limit, lost).await.is_ok())
            })
            .unwrap_or(true)
    }

    /// Gives it back now (see [`HeldLock::release`]).
    ///
    /// # Errors
    /// As the async hold's `release`.
    pub fn release(self) -> Result<()> {
        let (held, bridge) = self.take();
        bridge.run("release", held.release())
    }
}

impl<G: Fenced + Send + 'static> Guard<G> {
    /// The fencing token (see [`Fenced::token`]).
    pub fn token(&self) -> u64 {
        self.get().token()
    }
}

impl<G: Reenter + Send + Sync + 'static> Guard<G> {
    /// Takes one more hold for the same owner (see [`Reenter::reenter`]).
    ///
    /// # Errors
    /// As the async hold's `reenter`.
    pub fn reenter(&self) -> Result<Guard<G>> {
        // The async call borrows the guard, so it runs on this thread.
        let reentered = self.bridge.run_borrowed(self.get().reenter())?;
        Ok(Guard::new(reentered, self.bridge.clone()))
    }
}

impl<G: HeldLock + Send + 'static> Drop for Guard<G> {
    fn drop(&mut self) {
        if let Some(held) = self.inner.take() {
            // A failure means it was lost or Redis is away: it expires by itself.
            let _ = self.bridge.run("release", held.release());
        }
    }
}

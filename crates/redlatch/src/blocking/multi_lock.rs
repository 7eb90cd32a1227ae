//! The blocking multi-lock.

use std::sync::Arc;
use std::time::Duration;

use super::lock::Lock;
use crate::engine::bridge::Bridge;
use crate::error::{Error, Result};

/// A blocking [`crate::MultiLock`]: several blocking [`Lock`]s, possibly of
/// different clients, taken all or nothing in key order.
#[derive(Clone, Debug)]
pub struct MultiLock {
    inner: crate::MultiLock,
    /// The runtimes of every client involved: kept alive while this lives.
    bridges: Vec<Arc<Bridge>>,
}

impl MultiLock {
    /// A multi-lock over `locks` (see [`crate::MultiLock::new`]).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> MultiLock {
        let mut bridges: Vec<Arc<Bridge>> = Vec::new();
        let mut inner = Vec::new();
        for lock in locks {
            let (lock, bridge) = lock.parts();
            if !bridges.iter().any(|known| Arc::ptr_eq(known, bridge)) {
                bridges.push(bridge.clone());
            }
            inner.push(lock.clone());
        }
        MultiLock {
            inner: crate::MultiLock::new(inner),
            bridges,
        }
    }

    /// Blocks until every lock is held (see [`crate::MultiLock::acquire`]).
    ///
    /// # Errors
    /// As [`crate::MultiLock::acquire`].
    pub fn acquire(&self) -> Result<MultiGuard> {
        let all = self.inner.clone();
        self.run(async move { all.acquire().await.map(Some) })?
            .ok_or_else(|| self.empty())
    }

    /// One attempt per lock (see [`crate::MultiLock::try_acquire`]).
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_acquire`].
    pub fn try_acquire(&self) -> Result<Option<MultiGuard>> {
        let all = self.inner.clone();
        self.run(async move { all.try_acquire().await })
    }

    /// Blocks for all of them as long as `wait` says (see
    /// [`crate::MultiLock::acquire_within`]).
    ///
    /// # Errors
    /// As [`crate::MultiLock::acquire_within`].
    pub fn acquire_within(&self, wait: Option<Duration>) -> Result<MultiGuard> {
        let all = self.inner.clone();
        self.run(async move { all.acquire_within(wait).await.map(Some) })?
            .ok_or_else(|| self.empty())
    }

    fn run(
        &self,
        call: impl Future<Output = Result<Option<crate::MultiGuard>>> + Send + 'static,
    ) -> Result<Option<MultiGuard>> {
        let Some(bridge) = self.bridges.first() else {
            return Err(Error::InvalidConfig(
                "a multi-lock needs at least one lock".to_owned(),
            ));
        };
        let guard = bridge.run("multi-lock acquire", call)?;
        Ok(guard.map(|inner| MultiGuard {
            inner: Some(inner),
            bridges: self.bridges.clone(),
        }))
    }

    fn empty(&self) -> Error {
        Error::Protocol {
            op: "multi-lock acquire",
            detail: "an acquire that waits came back empty".to_owned(),
        }
    }
}

/// A blocking [`crate::MultiGuard`]. Dropping it releases every lock before
/// the drop returns.
#[must_use = "dropping a multi-guard releases every lock at once"]
#[derive(Debug)]
pub struct MultiGuard {
    /// `None` once released.
    inner: Option<crate::MultiGuard>,
    bridges: Vec<Arc<Bridge>>,
}

impl MultiGuard {
    fn get(&self) -> &crate::MultiGuard {
        self.inner
            .as_ref()
            .expect("a multi-guard is released only once")
    }

    /// The fencing tokens, in acquisition (key) order.
    pub fn tokens(&self) -> Vec<u64> {
        self.get()
            .guards()
            .iter()
            .map(crate::Guard::token)
            .collect()
    }

    /// True while every lock is known to be held.
    pub fn is_held(&self) -> bool {
        self.get().is_held()
    }

    /// Releases every lock now (see [`crate::MultiGuard::release`]).
    ///
    /// # Errors
    /// As [`crate::MultiGuard::release`].
    pub fn release(mut self) -> Result<()> {
        let guard = self
            .inner
            .take()
            .expect("a multi-guard is released only once");
        self.bridges[0].run("multi-lock release", async move { guard.release().await })
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        if let Some(guard) = self.inner.take() {
            let _ = self.bridges[0].run("multi-lock release", async move { guard.release().await });
        }
    }
}

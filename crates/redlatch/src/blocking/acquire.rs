//! The three acquires of every blocking handle, written once over [`AcquireLock`].

use std::sync::Arc;
use std::time::Duration;

use super::bridge::Bridge;
use super::guard::Guard;
use crate::error::Result;
use crate::vocabulary::AcquireLock;

impl Bridge {
    /// Blocks until `handle` is held (its `acquire`); `op` names the call
    /// should the runtime be gone.
    pub(super) fn acquire<L>(
        self: &Arc<Self>,
        op: &'static str,
        handle: &L,
    ) -> Result<Guard<L::Guard>>
    where
        L: AcquireLock + Clone + Send + Sync + 'static,
        L::Guard: Send + 'static,
    {
        let handle = handle.clone();
        let held = self.run(op, async move { handle.acquire().await })?;
        Ok(Guard::new(held, self.clone()))
    }

    /// One attempt at `handle` (its `try_acquire`).
    pub(super) fn try_acquire<L>(
        self: &Arc<Self>,
        op: &'static str,
        handle: &L,
    ) -> Result<Option<Guard<L::Guard>>>
    where
        L: AcquireLock + Clone + Send + Sync + 'static,
        L::Guard: Send + 'static,
    {
        let handle = handle.clone();
        let held = self.run(op, async move { handle.try_acquire().await })?;
        Ok(held.map(|held| Guard::new(held, self.clone())))
    }

    /// Blocks at most `wait` for `handle` (its `acquire_timeout`).
    pub(super) fn acquire_timeout<L>(
        self: &Arc<Self>,
        op: &'static str,
        handle: &L,
        wait: Duration,
    ) -> Result<Guard<L::Guard>>
    where
        L: AcquireLock + Clone + Send + Sync + 'static,
        L::Guard: Send + 'static,
    {
        let handle = handle.clone();
        let held = self.run(op, async move { handle.acquire_timeout(wait).await })?;
        Ok(Guard::new(held, self.clone()))
    }
}

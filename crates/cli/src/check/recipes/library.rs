//! How a worker takes and gives back the library's own lock, either kind
//! (`redlatch*` on one server or a Sentinel group, `redlock*` over five
//! masters): one [`Recipe`] over the CLI's `lock_api`, so both are
//! exercised the same way. Each kind's connection and promises stay in its
//! own file.

use std::time::Duration;

use redlatch::Error;

use super::recipe::{LOCK_KEY, Recipe};
use crate::check::workload::points::Points;
use crate::lock_api::{AnyGuard, AnyLock, LockSource};

/// Where the locks come from, and the guard while held.
pub struct LibraryRecipe<S: LockSource> {
    source: S,
    guard: Option<<S::Lock as AnyLock>::Guard>,
}

impl<S: LockSource> LibraryRecipe<S> {
    /// The recipe over `source`, holding nothing yet.
    pub fn new(source: S) -> LibraryRecipe<S> {
        LibraryRecipe {
            source,
            guard: None,
        }
    }

    fn keep(&mut self, guard: <S::Lock as AnyLock>::Guard) -> u64 {
        let token = guard.token();
        self.guard = Some(guard);
        token
    }
}

impl<S: LockSource> Recipe for LibraryRecipe<S> {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        // A lock handle per attempt, as a fresh owner each time.
        match self.source.lock(LOCK_KEY).try_acquire().await {
            Ok(Some(guard)) => Ok(Some(Some(self.keep(guard)))),
            Ok(None) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    async fn acquire(
        &mut self,
        _points: &Points,
        wait: Duration,
    ) -> Result<Option<Option<u64>>, String> {
        // The library waits on pub/sub, not by polling.
        match self.source.lock(LOCK_KEY).acquire_timeout(wait).await {
            Ok(guard) => Ok(Some(Some(self.keep(guard)))),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    fn still_held(&self) -> bool {
        self.guard.as_ref().is_some_and(AnyGuard::is_held)
    }

    async fn release(&mut self, _points: &Points) -> Result<bool, String> {
        let Some(guard) = self.guard.take() else {
            return Ok(false);
        };
        match Box::new(guard).release().await {
            Ok(()) => Ok(true),
            Err(Error::NotHeld { .. }) => Ok(false),
            Err(error) => Err(error.to_string()),
        }
    }
}

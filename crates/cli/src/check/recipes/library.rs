//! How a worker takes and gives back the library's own locks, every kind
//! (`redlatch*` on one server or a Sentinel group, `redlatch-token*` the
//! token lock there, `redlock*` over five masters): one [`Recipe`] over
//! the library's [`AcquireLock`] and [`HeldLock`] traits, so all are
//! exercised the same way. Each kind's connection and promises stay in its
//! own file.

use std::time::Duration;

use redlatch::{AcquireLock, Error, Fenced, Guard, HeldLock, RedlockGuard, TokenGuard};

use super::recipe::Recipe;
use crate::check::points::Points;

/// A library guard as the lab holds it: the fencing token its writes carry.
pub trait LabGuard: HeldLock {
    /// The guard's fencing token; `None` for a token lock not asked to fence.
    fn lab_token(&self) -> Option<u64>;
}

impl LabGuard for Guard {
    fn lab_token(&self) -> Option<u64> {
        Some(Fenced::token(self))
    }
}

impl LabGuard for RedlockGuard {
    fn lab_token(&self) -> Option<u64> {
        Some(Fenced::token(self))
    }
}

impl LabGuard for TokenGuard {
    fn lab_token(&self) -> Option<u64> {
        self.fencing_token()
    }
}

/// Where the locks come from, and the guard while held.
pub struct LibraryRecipe<L: AcquireLock> {
    /// A handle to the lab's lock, with an owner of its own.
    handle: Box<dyn Fn() -> L + Send + Sync>,
    guard: Option<L::Guard>,
}

impl<L> LibraryRecipe<L>
where
    L: AcquireLock,
    L::Guard: LabGuard,
{
    /// The recipe over the handles `handle` makes, holding nothing yet.
    pub fn new(handle: impl Fn() -> L + Send + Sync + 'static) -> LibraryRecipe<L> {
        LibraryRecipe {
            handle: Box::new(handle),
            guard: None,
        }
    }

    fn keep(&mut self, guard: L::Guard) -> Option<u64> {
        let token = guard.lab_token();
        self.guard = Some(guard);
        token
    }
}

impl<L> Recipe for LibraryRecipe<L>
where
    L: AcquireLock,
    L::Guard: LabGuard,
{
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        // A lock handle per attempt, as a fresh owner each time.
        match (self.handle)().try_acquire().await {
            Ok(Some(guard)) => Ok(Some(self.keep(guard))),
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
        match (self.handle)().acquire_within(Some(wait)).await {
            Ok(guard) => Ok(Some(self.keep(guard))),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    fn still_held(&self) -> bool {
        self.guard.as_ref().is_some_and(HeldLock::is_held)
    }

    async fn release(&mut self, _points: &Points) -> Result<bool, String> {
        let Some(guard) = self.guard.take() else {
            return Ok(false);
        };
        match guard.release().await {
            Ok(()) => Ok(true),
            Err(Error::NotHeld { .. }) => Ok(false),
            Err(error) => Err(error.to_string()),
        }
    }
}

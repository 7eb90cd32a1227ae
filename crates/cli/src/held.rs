//! The guard `run` holds: a single-server lock, or Redlock over several masters.

use std::future::Future;
use std::pin::Pin;

use redlatch::{Guard, LostReason, RedlockGuard};

/// One hold, whichever kind `--redis` asked for.
#[derive(Debug)]
pub enum HeldGuard {
    /// One `--redis`: the library's reentrant lock.
    Single(Guard),
    /// Several `--redis`: Redlock over independent masters.
    Redlock(RedlockGuard),
}

impl HeldGuard {
    /// The fencing token handed to the command.
    pub fn token(&self) -> u64 {
        match self {
            HeldGuard::Single(guard) => guard.token(),
            HeldGuard::Redlock(guard) => guard.token(),
        }
    }

    /// Resolves when the lock is known to be lost.
    pub fn lost(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        match self {
            HeldGuard::Single(guard) => Box::pin(guard.lost()),
            HeldGuard::Redlock(guard) => Box::pin(guard.lost()),
        }
    }

    /// Why the lock is no longer held, once it is not.
    pub fn lost_reason(&self) -> Option<LostReason> {
        match self {
            HeldGuard::Single(guard) => guard.lost_reason(),
            HeldGuard::Redlock(guard) => guard.lost_reason(),
        }
    }

    /// Releases the hold.
    pub async fn release(self) -> redlatch::Result<()> {
        match self {
            HeldGuard::Single(guard) => guard.release().await,
            // The process exits next: let no minority of holds wait out its lease.
            HeldGuard::Redlock(guard) => guard.release_everywhere().await,
        }
    }
}

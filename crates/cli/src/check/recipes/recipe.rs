//! A recipe as a worker runs it, and the lock it takes.

use std::time::Duration;

use crate::check::points::Points;

/// The key every recipe locks, on the lock server.
pub const LOCK_KEY: &str = "lab:lock";

/// A recipe as a worker runs it: one lock, taken and given back in a loop.
pub trait Recipe {
    /// One attempt to take the lock. `Some(token)` when taken (`token` is the
    /// fencing token, for recipes that have one).
    async fn try_acquire(&mut self, points: &Points) -> Result<Option<Option<u64>>, String>;

    /// Waits up to `wait` for the lock. Polls [`try_acquire`](Self::try_acquire)
    /// unless the recipe can wait better.
    async fn acquire(
        &mut self,
        points: &Points,
        wait: Duration,
    ) -> Result<Option<Option<u64>>, String> {
        let give_up = tokio::time::Instant::now() + wait;
        loop {
            if let Some(token) = self.try_acquire(points).await? {
                return Ok(Some(token));
            }
            if tokio::time::Instant::now() >= give_up {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Whether the holder may still act, as far as it can tell.
    fn still_held(&self) -> bool {
        true
    }

    /// Gives the lock back; `Ok(false)` when it was not ours any more.
    async fn release(&mut self, points: &Points) -> Result<bool, String>;
}

/// Where a worker's lock servers are.
#[derive(Debug, Clone, Copy)]
pub struct LockServers<'a> {
    /// Their URLs (single-server recipes use the first), or the Sentinels'.
    pub urls: &'a [String],
    /// The master's name when `urls` are Sentinels.
    pub sentinel_master: Option<&'a str>,
}

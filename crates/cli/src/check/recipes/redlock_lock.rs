//! `redlock` and `redlock-fenced`: redlatch's Redlock over five independent
//! lock servers, renewed by its watchdog. Faults hit one of the five (a
//! minority). As with `redlatch`, the worker checks `is_held()` before
//! writing; `redlock-fenced` also sends the fencing token with the write.

use std::time::Duration;

use redlatch::{Error, Redlock, RedlockGuard, Settings};

use super::{Info, LOCK_KEY, Promise, Recipe};
use crate::check::faults::fault::Fault;
use crate::check::faults::point::Point;
use crate::check::workload::points::Points;

/// Masters of the Redlock.
const MASTERS: usize = 5;

/// What the unfenced Redlock promises (see `docs/SAFETY.md`).
pub const INFO: Info = Info {
    fenced: false,
    pause_point: Point::BeforeWrite,
    has_between: false,
    uses_scripts: true,
    promises: promises_unfenced,
    servers: MASTERS,
    sentinel: false,
    replicas_only: false,
};

/// What the fenced Redlock promises: a paused holder's late write is refused.
pub const INFO_FENCED: Info = Info {
    fenced: true,
    promises: promises_fenced,
    ..INFO
};

fn promises_unfenced(fault: Fault) -> Promise {
    match fault {
        // A paused process writes late whatever the lock: fencing's job.
        Fault::PauseClient => Promise::LIVE,
        // A master that comes back empty at once can help a second owner
        // to a majority while the first still holds (restart it after a
        // lease instead: restart-redis-late).
        Fault::RestartRedis => Promise::LIVE,
        // The same with bare majorities (each worker reaches three masters):
        // the holder's grant on the restarted master is forgotten at once.
        Fault::RestartMaster => Promise::LIVE,
        // Not a single-server fault (n/a).
        Fault::Failover => Promise::NOTHING,
        // One master of five paused, killed, flushed or with its clock
        // moved is a minority: the majority still excludes.
        _ => Promise::EVERYTHING,
    }
}

fn promises_fenced(fault: Fault) -> Promise {
    match fault {
        Fault::PauseClient => Promise {
            no_lost_updates: true,
            no_stale_writes: true,
            ..Promise::LIVE
        },
        other => promises_unfenced(other),
    }
}

/// The Redlock, and the guard while held.
pub struct RedlockRecipe {
    redlock: Redlock,
    guard: Option<RedlockGuard>,
}

impl RedlockRecipe {
    /// Connects to every master with `lease` as the watchdog's lease.
    pub async fn new(urls: &[String], lease: Duration) -> Result<RedlockRecipe, String> {
        let mut settings = Settings::default();
        settings.default_lease = lease;
        settings.response_timeout = lease / 2;
        // A master the worker cannot reach (restart-master) must not hold
        // up its start for the default 10 s.
        settings.connect_timeout = lease * 2;
        let redlock = Redlock::connect_with(urls, settings)
            .await
            .map_err(|error| error.to_string())?;
        Ok(RedlockRecipe {
            redlock,
            guard: None,
        })
    }

    fn keep(&mut self, guard: RedlockGuard) -> u64 {
        let token = guard.token();
        self.guard = Some(guard);
        token
    }
}

impl Recipe for RedlockRecipe {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        match self.redlock.lock(LOCK_KEY).try_acquire().await {
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
        match self.redlock.lock(LOCK_KEY).acquire_timeout(wait).await {
            Ok(guard) => Ok(Some(Some(self.keep(guard)))),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    fn still_held(&self) -> bool {
        self.guard.as_ref().is_some_and(RedlockGuard::is_held)
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

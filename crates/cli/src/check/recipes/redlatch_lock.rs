//! `redlatch` and `redlatch-fenced`: the library's lock, renewed by its
//! watchdog. The worker checks [`Guard::is_held`] before writing, as the
//! library asks; `redlatch-fenced` also sends the fencing token with the
//! write, and the store refuses a token lower than one it has accepted.

use std::time::Duration;

use redlatch::{Client, Error, Guard};

use super::{Info, LOCK_KEY, Promise, Recipe};
use crate::check::faults::{Fault, Point};
use crate::check::workload::points::Points;

/// What the unfenced lock promises (see `docs/SAFETY.md`).
pub const INFO: Info = Info {
    fenced: false,
    pause_point: Point::BeforeWrite,
    has_between: false,
    uses_scripts: true,
    promises: promises_unfenced,
    servers: 1,
};

/// What the fenced lock promises: a paused holder's late write is refused.
pub const INFO_FENCED: Info = Info {
    fenced: true,
    promises: promises_fenced,
    ..INFO
};

fn promises_unfenced(fault: Fault) -> Promise {
    match fault {
        Fault::None
        | Fault::KillClient
        | Fault::CrashBetween
        | Fault::PauseRedis
        | Fault::RestartRedisLate
        | Fault::FlushScripts
        | Fault::KillSubscribers => Promise::EVERYTHING,
        // A process stopped between its last check and its write cannot be
        // stopped by any lock: that is what fencing is for.
        Fault::PauseClient => Promise::LIVE,
        // Redis forgets the lock (restart empty) or expires it early (clock):
        // the holder learns it at its next renewal, up to lease/3 later.
        Fault::RestartRedis | Fault::ClockJump => Promise::LIVE,
    }
}

fn promises_fenced(fault: Fault) -> Promise {
    match fault {
        // Two workers may still believe they hold the lock, but the store
        // refuses the one that was overtaken.
        Fault::PauseClient => Promise {
            no_lost_updates: true,
            no_stale_writes: true,
            ..Promise::LIVE
        },
        // The fencing counter restarts at 1 with an empty Redis: tokens are
        // no longer increasing, so fencing protects nothing across it.
        other => promises_unfenced(other),
    }
}

/// A client of the lock server, and the guard while held.
pub struct RedlatchLock {
    client: Client,
    guard: Option<Guard>,
}

impl RedlatchLock {
    /// Connects to the lock server with `lease` as the watchdog's lease.
    pub async fn new(url: &str, lease: Duration) -> Result<RedlatchLock, String> {
        let client = Client::builder(url)
            .default_lease(lease)
            .response_timeout(lease / 2)
            .connect()
            .await
            .map_err(|error| error.to_string())?;
        Ok(RedlatchLock {
            client,
            guard: None,
        })
    }
}

impl Recipe for RedlatchLock {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        match self.client.lock(LOCK_KEY).try_acquire().await {
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
        match self.client.lock(LOCK_KEY).acquire_timeout(wait).await {
            Ok(guard) => Ok(Some(Some(self.keep(guard)))),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    fn still_held(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::is_held)
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

impl RedlatchLock {
    fn keep(&mut self, guard: Guard) -> u64 {
        let token = guard.token();
        self.guard = Some(guard);
        token
    }
}

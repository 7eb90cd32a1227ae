//! `redlock` and `redlock-fenced`: redlatch's Redlock over five independent
//! lock servers, renewed by its watchdog. Faults hit one of the five (a
//! minority). As with `redlatch`, the worker checks `is_held()` before
//! writing; `redlock-fenced` also sends the fencing token with the write.

use std::time::Duration;

use redlatch::{Client, Redlock, RedlockLock, Settings};

use super::info::{Info, Promise, fenced};
use super::library::LibraryRecipe;
use super::recipe::LOCK_KEY;
use crate::check::fault::Fault;

/// Masters of the Redlock.
const MASTERS: usize = 5;

/// What the unfenced Redlock promises (see `docs/SAFETY.md`).
pub const INFO: Info = Info {
    uses_scripts: true,
    promises: promises_unfenced,
    servers: MASTERS,
    ..Info::PLAIN
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
    fenced(fault, promises_unfenced)
}

/// Connects to every master with `lease` as the watchdog's lease.
pub async fn connect(
    urls: &[String],
    lease: Duration,
) -> Result<LibraryRecipe<RedlockLock>, String> {
    let mut settings = Settings::default();
    settings.default_lease = lease;
    settings.response_timeout = lease / 2;
    // A master the worker cannot reach (restart-master) must not hold
    // up its start for the default 10 s.
    settings.connect_timeout = lease * 2;
    let builders = urls
        .iter()
        .map(|url| Client::builder(url).settings(settings.clone()));
    let redlock = Redlock::connect_with(builders)
        .await
        .map_err(|error| error.to_string())?;
    Ok(LibraryRecipe::new(move || redlock.lock(LOCK_KEY)))
}

//! `redlatch` and `redlatch-fenced`: the library's lock, renewed by its
//! watchdog. The worker checks `is_held()` before writing, as the
//! library asks; `redlatch-fenced` also sends the fencing token with the
//! write, and the store refuses a token lower than one it has accepted.

use std::time::Duration;

use redlatch::{Client, ClientBuilder, Lock};

use super::info::{Info, Promise, fenced};
use super::library::LibraryRecipe;
use super::recipe::{LOCK_KEY, LockServers};
use crate::check::fault::Fault;

/// What the unfenced lock promises (see `docs/SAFETY.md`).
pub const INFO: Info = Info {
    uses_scripts: true,
    promises: promises_unfenced,
    sentinel: true,
    ..Info::PLAIN
};

/// What the fenced lock promises: a paused holder's late write is refused.
pub const INFO_FENCED: Info = Info {
    fenced: true,
    promises: promises_fenced,
    ..INFO
};

/// The lock with replica acknowledgement (`wait_for_replicas`): only where
/// there are replicas, that is under `failover`.
pub const INFO_WAIT: Info = Info {
    replicas_only: true,
    promises: promises_unfenced,
    ..INFO
};

fn promises_unfenced(fault: Fault) -> Promise {
    match fault {
        Fault::None
        | Fault::Partition
        | Fault::PartitionOneWay
        | Fault::Latency
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
        // A promoted replica may never have seen the lock, nor the fencing
        // counter's last increments (see SAFETY.md); WAIT narrows this.
        Fault::Failover => Promise::LIVE,
        // Redlock faults: not this recipe's (n/a).
        Fault::RestartMaster | Fault::RestartMasterLate => Promise::NOTHING,
    }
}

fn promises_fenced(fault: Fault) -> Promise {
    // Beyond a pause: the fencing counter restarts at 1 with an empty
    // Redis, tokens are no longer increasing, so fencing protects nothing
    // across it.
    fenced(fault, promises_unfenced)
}

/// Connects to the lock server (or, through Sentinel, to its master) with
/// `lease` as the watchdog's lease; with `replicas`, every acquire waits
/// for one replica to confirm it (`WAIT 1`, up to 100 ms).
pub async fn connect(
    servers: LockServers<'_>,
    lease: Duration,
    replicas: bool,
) -> Result<LibraryRecipe<Lock>, String> {
    let client = client(servers, lease, replicas).await?;
    Ok(LibraryRecipe::new(move || client.lock(LOCK_KEY)))
}

/// The library's client as the lab's recipes use it, connected as
/// [`connect`] says.
pub async fn client(
    servers: LockServers<'_>,
    lease: Duration,
    replicas: bool,
) -> Result<Client, String> {
    let url = servers.urls.first().map_or("", String::as_str);
    let mut builder = match servers.sentinel_master {
        Some(master) => ClientBuilder::sentinel(servers.urls.iter().cloned(), master),
        None => Client::builder(url),
    };
    if replicas {
        builder = builder.wait_for_replicas(1, Duration::from_millis(100));
    }
    builder
        .default_lease(lease)
        .response_timeout(lease / 2)
        .connect()
        .await
        .map_err(|error| error.to_string())
}

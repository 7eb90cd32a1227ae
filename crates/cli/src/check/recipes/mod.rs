//! The lock recipes under test: the seeds' broken ones (which live here
//! only, never in the library) and redlatch's own lock.
//!
//! Each recipe is one file: how a worker takes and gives back the lock
//! ([`Recipe`]), and what the recipe promises under each fault ([`Info`]).

mod get_del;
mod library;
mod noop;
mod redlatch_lock;
mod redlock_lock;
mod set_nx_px;
mod setnx_expire;
mod setnx_getset;

use std::time::Duration;

use clap::ValueEnum;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::Serialize;

use super::faults::fault::Fault;
use super::faults::point::Point;
use super::workload::points::Points;

/// The key every recipe locks, on the lock server.
pub const LOCK_KEY: &str = "lab:lock";

/// A recipe by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecipeName {
    /// SETNX, then EXPIRE as a second command; DEL to release.
    SetnxExpire,
    /// SETNX with an expiry timestamp as value; GET/GETSET takeover.
    SetnxGetset,
    /// SET NX PX with a token; release by GET, compare, DEL.
    GetDel,
    /// SET NX PX with a token; release by a compare-and-delete script. No fencing.
    SetNxPx,
    /// redlatch's lock, renewed by its watchdog. Writes are not fenced.
    Redlatch,
    /// redlatch's lock; the store refuses writes with an older fencing token.
    RedlatchFenced,
    /// redlatch's lock with `wait_for_replicas(1, 100ms)`: an acquire no
    /// replica confirmed is undone. Runs only where there are replicas.
    RedlatchWait,
    /// redlatch's Redlock over five lock servers (faults hit one). Writes are not fenced.
    Redlock,
    /// redlatch's Redlock; the store refuses writes with an older fencing token.
    RedlockFenced,
    /// No lock at all: every acquire succeeds at once. Claims every
    /// guarantee, so the lab must catch it.
    #[value(hide = true)]
    Noop,
}

/// What a recipe promises under a fault; each `true` must hold in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Promise {
    /// No two workers believe they hold the lock at once.
    pub exclusive: bool,
    /// No accepted write overwrites one the writer did not read.
    pub no_lost_updates: bool,
    /// No write is accepted from a holder whose lock was taken by another since.
    pub no_stale_writes: bool,
    /// Someone acquires again within a bounded time (see the checker).
    pub live: bool,
}

impl Promise {
    /// Nothing promised.
    pub const NOTHING: Promise = Promise {
        exclusive: false,
        no_lost_updates: false,
        no_stale_writes: false,
        live: false,
    };
    /// Everything promised.
    pub const EVERYTHING: Promise = Promise {
        exclusive: true,
        no_lost_updates: true,
        no_stale_writes: true,
        live: true,
    };
    /// Only liveness promised.
    pub const LIVE: Promise = Promise {
        live: true,
        ..Promise::NOTHING
    };
}

/// Facts about a recipe the lab needs before running it.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// The store checks fencing tokens for this recipe's writes.
    pub fenced: bool,
    /// Where a pause hurts this recipe most.
    pub pause_point: Point,
    /// Whether the recipe has a step of two commands (`crash-between` applies).
    pub has_between: bool,
    /// Whether the recipe uses Lua scripts or pub/sub (`flush-scripts` and
    /// `kill-subscribers` apply).
    pub uses_scripts: bool,
    /// What it promises under each fault.
    pub promises: fn(Fault) -> Promise,
    /// How many lock servers it uses (faults hit the first).
    pub servers: usize,
    /// Whether it can run on a Sentinel group (`failover` applies).
    pub sentinel: bool,
    /// Whether it needs replicas (runs under `failover` only).
    pub replicas_only: bool,
}

impl RecipeName {
    /// The recipes `redlatch check` runs by default.
    pub const DEFAULT: [RecipeName; 9] = [
        RecipeName::SetnxExpire,
        RecipeName::SetnxGetset,
        RecipeName::GetDel,
        RecipeName::SetNxPx,
        RecipeName::Redlatch,
        RecipeName::RedlatchFenced,
        RecipeName::RedlatchWait,
        RecipeName::Redlock,
        RecipeName::RedlockFenced,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            RecipeName::SetnxExpire => "setnx-expire",
            RecipeName::SetnxGetset => "setnx-getset",
            RecipeName::GetDel => "get-del",
            RecipeName::SetNxPx => "set-nx-px",
            RecipeName::Redlatch => "redlatch",
            RecipeName::RedlatchFenced => "redlatch-fenced",
            RecipeName::RedlatchWait => "redlatch-wait",
            RecipeName::Redlock => "redlock",
            RecipeName::RedlockFenced => "redlock-fenced",
            RecipeName::Noop => "noop",
        }
    }

    /// Facts about the recipe.
    pub fn info(self) -> Info {
        match self {
            RecipeName::SetnxExpire => setnx_expire::INFO,
            RecipeName::SetnxGetset => setnx_getset::INFO,
            RecipeName::GetDel => get_del::INFO,
            RecipeName::SetNxPx => set_nx_px::INFO,
            RecipeName::Redlatch => redlatch_lock::INFO,
            RecipeName::RedlatchFenced => redlatch_lock::INFO_FENCED,
            RecipeName::RedlatchWait => redlatch_lock::INFO_WAIT,
            RecipeName::Redlock => redlock_lock::INFO,
            RecipeName::RedlockFenced => redlock_lock::INFO_FENCED,
            RecipeName::Noop => noop::INFO,
        }
    }
}

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

/// Runs `body` with the recipe `name` connected to the lock `servers`.
pub async fn with_recipe<F, T>(
    name: RecipeName,
    servers: LockServers<'_>,
    lease: Duration,
    body: F,
) -> T
where
    F: AsyncRecipeFn<T>,
{
    let urls = servers.urls;
    let url = urls.first().map_or("", String::as_str);
    match name {
        RecipeName::SetnxExpire => {
            body.call(setnx_expire::SetnxExpire::new(url, lease).await)
                .await
        }
        RecipeName::SetnxGetset => {
            body.call(setnx_getset::SetnxGetset::new(url, lease).await)
                .await
        }
        RecipeName::GetDel => body.call(get_del::GetDel::new(url, lease).await).await,
        RecipeName::SetNxPx => body.call(set_nx_px::SetNxPx::new(url, lease).await).await,
        RecipeName::Redlatch | RecipeName::RedlatchFenced | RecipeName::RedlatchWait => {
            let replicas = name == RecipeName::RedlatchWait;
            body.call(redlatch_lock::connect(servers, lease, replicas).await)
                .await
        }
        RecipeName::Redlock | RecipeName::RedlockFenced => {
            body.call(redlock_lock::connect(urls, lease).await).await
        }
        RecipeName::Noop => body.call(Ok(noop::Noop)).await,
    }
}

/// A generic async function over any [`Recipe`] (closures cannot be generic).
pub trait AsyncRecipeFn<T> {
    /// Runs with the connected recipe, or the error connecting it.
    async fn call<R: Recipe>(self, recipe: Result<R, String>) -> T;
}

/// A connection to `url` that reconnects by itself; each call gives up
/// after `timeout`.
pub async fn connect(url: &str, timeout: Duration) -> Result<ConnectionManager, String> {
    let client = redis::Client::open(url).map_err(|error| format!("{url}: {error}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100));
    tokio::time::timeout(
        timeout * 4,
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .map_err(|_| format!("{url}: connect timed out"))?
    .map_err(|error| format!("{url}: {error}"))
}

/// Runs one command, turning every failure into its message.
pub async fn query<T: redis::FromRedisValue>(
    conn: &mut ConnectionManager,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    cmd.query_async(conn)
        .await
        .map_err(|error| error.to_string())
}

/// A token unique to this process and call, for recipes that tag their lock.
pub fn fresh_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

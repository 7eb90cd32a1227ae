//! The lock recipes under test: the seeds' broken ones (which live here
//! only, never in the library) and redlatch's own locks.
//!
//! Each recipe is one file: how a worker takes and gives back the lock
//! ([`Recipe`], `recipe.rs`), and what the recipe promises under each fault
//! ([`Info`], `info.rs`). This file is the registry: each recipe's name,
//! its facts, and how it connects.

pub mod commands;
mod get_del;
pub mod info;
mod library;
mod noop;
pub mod recipe;
mod redlatch_lock;
mod redlatch_token;
mod redlock_lock;
mod set_nx_px;
mod setnx_expire;
mod setnx_getset;

use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;

use info::Info;
use recipe::{LockServers, Recipe};

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
    /// redlatch's token lock (`SET NX PX` with an owner token; no script
    /// where the server allows), renewed by its watchdog. Writes are not fenced.
    RedlatchToken,
    /// redlatch's token lock, fenced: the store refuses writes with an older fencing token.
    RedlatchTokenFenced,
    /// redlatch's Redlock over five lock servers (faults hit one). Writes are not fenced.
    Redlock,
    /// redlatch's Redlock; the store refuses writes with an older fencing token.
    RedlockFenced,
    /// No lock at all: every acquire succeeds at once. Claims every
    /// guarantee, so the lab must catch it.
    #[value(hide = true)]
    Noop,
}

impl RecipeName {
    /// The recipes `redlatch check` runs by default.
    pub const DEFAULT: [RecipeName; 11] = [
        RecipeName::SetnxExpire,
        RecipeName::SetnxGetset,
        RecipeName::GetDel,
        RecipeName::SetNxPx,
        RecipeName::Redlatch,
        RecipeName::RedlatchFenced,
        RecipeName::RedlatchWait,
        RecipeName::RedlatchToken,
        RecipeName::RedlatchTokenFenced,
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
            RecipeName::RedlatchToken => "redlatch-token",
            RecipeName::RedlatchTokenFenced => "redlatch-token-fenced",
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
            RecipeName::RedlatchToken => redlatch_token::INFO,
            RecipeName::RedlatchTokenFenced => redlatch_token::INFO_FENCED,
            RecipeName::Redlock => redlock_lock::INFO,
            RecipeName::RedlockFenced => redlock_lock::INFO_FENCED,
            RecipeName::Noop => noop::INFO,
        }
    }
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
        RecipeName::RedlatchToken | RecipeName::RedlatchTokenFenced => {
            let fenced = name == RecipeName::RedlatchTokenFenced;
            body.call(redlatch_token::connect(servers, lease, fenced).await)
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

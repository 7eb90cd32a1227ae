//! `redlatch-token` and `redlatch-token-fenced`: the library's token lock
//! (`client.token_lock`, the `SET NX PX` lock with an owner token), renewed
//! by the same watchdog and watched by the same loss watch as `redlatch`.
//! The worker checks `is_held()` before writing, as for `redlatch`;
//! `redlatch-token-fenced` asks the lock for a fencing token and sends it
//! with the write. On servers with `DELIFEQ` (or `DELEX … IFEQ`) and
//! `SET … IFEQ` no script runs; elsewhere small scripts release and renew.

use std::time::Duration;

use redlatch::TokenLock;

use super::info::Info;
use super::library::LibraryRecipe;
use super::recipe::{LOCK_KEY, LockServers};
use super::redlatch_lock;

/// What the unfenced token lock promises: what `redlatch` promises, fault
/// by fault (docs/SAFETY.md, "Token lock").
pub const INFO: Info = redlatch_lock::INFO;

/// What the fenced token lock promises: what `redlatch-fenced` promises.
pub const INFO_FENCED: Info = redlatch_lock::INFO_FENCED;

/// Connects as `redlatch` does; each attempt takes a token lock on the
/// lab's key, fenced when `fenced`.
pub async fn connect(
    servers: LockServers<'_>,
    lease: Duration,
    fenced: bool,
) -> Result<LibraryRecipe<TokenLock>, String> {
    let client = redlatch_lock::client(servers, lease, false).await?;
    Ok(LibraryRecipe::new(move || {
        let lock = client.token_lock(LOCK_KEY);
        if fenced { lock.fenced() } else { lock }
    }))
}

//! `set-nx-px` (seeds 001, 004 §4.8): `SET key token NX PX lease`; release
//! by a script that deletes the key only if it still holds our token.
//!
//! Correct as far as Redis goes, but the lease is fixed and there is no
//! fencing: a holder paused past its lease writes after the next holder
//! did, and that update is lost.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::commands::{connect, set_nx_px};
use super::info::Info;
use super::recipe::{LOCK_KEY, Recipe};
use crate::check::points::Points;

/// Promises nothing the lab holds it to: it is the seeds' "good enough"
/// recipe, shown beside redlatch's lock for comparison.
pub const INFO: Info = Info {
    uses_scripts: true,
    ..Info::PLAIN
};

/// The recipe's connection, lease, release script and our token while held.
pub struct SetNxPx {
    conn: ConnectionManager,
    lease_ms: u64,
    release: redis::Script,
    token: Option<String>,
}

impl SetNxPx {
    /// Connects to the lock server.
    pub async fn new(url: &str, lease: Duration) -> Result<SetNxPx, String> {
        Ok(SetNxPx {
            conn: connect(url, lease / 2).await?,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            release: redis::Script::new(include_str!("../scripts/compare_and_delete.lua")),
            token: None,
        })
    }
}

impl Recipe for SetNxPx {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        let Some(token) = set_nx_px(&mut self.conn, LOCK_KEY, self.lease_ms).await? else {
            return Ok(None);
        };
        self.token = Some(token);
        Ok(Some(None))
    }

    async fn release(&mut self, _points: &Points) -> Result<bool, String> {
        let token = self.token.take().unwrap_or_default();
        // EVALSHA, loading the script again after NOSCRIPT (flush-scripts).
        let deleted: u64 = self
            .release
            .key(LOCK_KEY)
            .arg(token)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|error| error.to_string())?;
        Ok(deleted == 1)
    }
}

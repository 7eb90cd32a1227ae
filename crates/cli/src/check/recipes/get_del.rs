//! `get-del` (seed 004 §4.5): `SET key token NX PX lease`; release by `GET`,
//! compare with our token, then `DEL`, as separate commands.
//!
//! Broken: a holder paused between its `GET` and its `DEL` past its lease
//! deletes the next holder's lock, so a third worker acquires beside the
//! second.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::commands::{connect, query, set_nx_px};
use super::info::Info;
use super::recipe::{LOCK_KEY, Recipe};
use crate::check::points::{Point, Points};

/// Promises nothing: it is one of the seeds' broken recipes.
pub const INFO: Info = Info {
    pause_point: Point::Between,
    has_between: true,
    ..Info::PLAIN
};

/// The recipe's connection, lease, and our token while held.
pub struct GetDel {
    conn: ConnectionManager,
    lease_ms: u64,
    token: Option<String>,
}

impl GetDel {
    /// Connects to the lock server.
    pub async fn new(url: &str, lease: Duration) -> Result<GetDel, String> {
        Ok(GetDel {
            conn: connect(url, lease / 2).await?,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            token: None,
        })
    }
}

impl Recipe for GetDel {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        let Some(token) = set_nx_px(&mut self.conn, LOCK_KEY, self.lease_ms).await? else {
            return Ok(None);
        };
        self.token = Some(token);
        Ok(Some(None))
    }

    async fn release(&mut self, points: &Points) -> Result<bool, String> {
        let token = self.token.take();
        let current: Option<String> =
            query(&mut self.conn, redis::cmd("GET").arg(LOCK_KEY)).await?;
        if current.is_none() || current != token {
            return Ok(false);
        }
        points.reach(Point::Between);
        let deleted: u64 = query(&mut self.conn, redis::cmd("DEL").arg(LOCK_KEY)).await?;
        Ok(deleted == 1)
    }
}

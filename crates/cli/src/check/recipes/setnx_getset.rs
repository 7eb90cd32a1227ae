//! `setnx-getset` (seed 000): `SETNX key expiry-timestamp`; when taken, `GET`
//! the timestamp and, if it has passed, `GETSET` a new one (whoever gets
//! the old value back has taken the lock over). Release: `GET`, compare
//! with our timestamp, `DEL`.
//!
//! Broken: the lease is judged by each client's wall clock, a losing
//! `GETSET` still overwrites the winner's timestamp, the value names no
//! owner, and the compare and the `DEL` are two commands.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionManager;

use super::commands::{connect, query};
use super::info::Info;
use super::recipe::{LOCK_KEY, Recipe};
use crate::check::points::{Point, Points};

/// Promises nothing: it is one of the seeds' broken recipes.
pub const INFO: Info = Info {
    has_between: true,
    ..Info::PLAIN
};

/// The recipe's connection, lease, and the timestamp we wrote.
pub struct SetnxGetset {
    conn: ConnectionManager,
    lease_ms: u64,
    mine: Option<u64>,
}

impl SetnxGetset {
    /// Connects to the lock server.
    pub async fn new(url: &str, lease: Duration) -> Result<SetnxGetset, String> {
        Ok(SetnxGetset {
            conn: connect(url, lease / 2).await?,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            mine: None,
        })
    }
}

/// Milliseconds since the epoch on this client's wall clock.
fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(0))
}

impl Recipe for SetnxGetset {
    async fn try_acquire(&mut self, _points: &Points) -> Result<Option<Option<u64>>, String> {
        let expiry = wall_ms() + self.lease_ms;
        let taken: bool = query(
            &mut self.conn,
            redis::cmd("SETNX").arg(LOCK_KEY).arg(expiry),
        )
        .await?;
        if taken {
            self.mine = Some(expiry);
            return Ok(Some(None));
        }
        let current: Option<u64> = query(&mut self.conn, redis::cmd("GET").arg(LOCK_KEY)).await?;
        match current {
            Some(current) if current < wall_ms() => {
                let old: Option<u64> = query(
                    &mut self.conn,
                    redis::cmd("GETSET").arg(LOCK_KEY).arg(expiry),
                )
                .await?;
                if old == Some(current) {
                    self.mine = Some(expiry);
                    return Ok(Some(None));
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    async fn release(&mut self, points: &Points) -> Result<bool, String> {
        let mine = self.mine.take();
        let current: Option<u64> = query(&mut self.conn, redis::cmd("GET").arg(LOCK_KEY)).await?;
        if current.is_none() || current != mine {
            return Ok(false);
        }
        points.reach(Point::Between);
        let deleted: u64 = query(&mut self.conn, redis::cmd("DEL").arg(LOCK_KEY)).await?;
        Ok(deleted == 1)
    }
}

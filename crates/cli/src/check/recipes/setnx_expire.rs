//! `setnx-expire` (seeds 000, 002): `SETNX key token`, then `PEXPIRE key
//! lease` as a second command; `DEL` to release.
//!
//! Broken twice: a holder that dies between the two commands leaves a key
//! that never expires (nobody acquires again), and `DEL` removes whoever's
//! lock is there, so a holder that outlived its lease frees the next one's.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::commands::{connect, fresh_token, query};
use super::info::Info;
use super::recipe::{LOCK_KEY, Recipe};
use crate::check::points::{Point, Points};

/// Promises nothing: it is one of the seeds' broken recipes.
pub const INFO: Info = Info {
    has_between: true,
    ..Info::PLAIN
};

/// The recipe's connection and lease.
pub struct SetnxExpire {
    conn: ConnectionManager,
    lease_ms: u64,
}

impl SetnxExpire {
    /// Connects to the lock server.
    pub async fn new(url: &str, lease: Duration) -> Result<SetnxExpire, String> {
        Ok(SetnxExpire {
            conn: connect(url, lease / 2).await?,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

impl Recipe for SetnxExpire {
    async fn try_acquire(&mut self, points: &Points) -> Result<Option<Option<u64>>, String> {
        let taken: bool = query(
            &mut self.conn,
            redis::cmd("SETNX").arg(LOCK_KEY).arg(fresh_token()),
        )
        .await?;
        if !taken {
            return Ok(None);
        }
        points.reach(Point::Between);
        let _: bool = query(
            &mut self.conn,
            redis::cmd("PEXPIRE").arg(LOCK_KEY).arg(self.lease_ms),
        )
        .await?;
        Ok(Some(None))
    }

    async fn release(&mut self, _points: &Points) -> Result<bool, String> {
        let deleted: u64 = query(&mut self.conn, redis::cmd("DEL").arg(LOCK_KEY)).await?;
        Ok(deleted == 1)
    }
}

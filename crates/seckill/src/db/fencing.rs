//! Fencing tokens, checked by the database.
//!
//! A lock's lease can run out while its holder is paused (a GC pause, a
//! stopped VM, a slow disk): another client then takes the lock, and the
//! first one, resumed, still believes it holds it. Each redlatch guard
//! carries a fencing token that grows with every acquisition of that lock
//! ([`redlatch::Guard::token`]). Every write made under the lock first
//! records the token in `seckill_fence` for the locked resource, in the
//! same transaction, and the database refuses a token older than the newest
//! one it has seen: the late writer's transaction rolls back instead of
//! committing over the newer holder's work.
//!
//! Each row carries when it may go (`expires_at`, the sale's end plus
//! `fence_keep`); the expiry sweeper deletes the rows past it.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Backend, Db, DbError, WriteTx, render};

impl Db {
    /// Deletes the fencing rows whose sale is long over (`expires_at` at or
    /// before `now`); how many went.
    pub(crate) async fn forget_fences(&self, now: DateTime<Utc>) -> Result<u64, DbError> {
        // Read first: an idle pass does not take SQLite's write lock.
        let any = sqlx::query(self.sql(sql::ANY_TO_FORGET))
            .bind(now.timestamp_millis())
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        if any.is_none() {
            return Ok(0);
        }
        let _gate = self.write_gate().await;
        let done = sqlx::query(self.sql(sql::FORGET))
            .bind(now.timestamp_millis())
            .execute(&self.pool)
            .await
            .map_err(DbError::classify)?;
        Ok(done.rows_affected())
    }
}

mod sql {
    pub const SEED_SQLITE: &str =
        "INSERT OR IGNORE INTO seckill_fence (resource, token, expires_at) VALUES (?, 0, ?)";
    pub const SEED_POSTGRES: &str = "INSERT INTO seckill_fence (resource, token, expires_at) \
         VALUES (?, 0, ?) ON CONFLICT DO NOTHING";
    pub const SEED_MYSQL: &str =
        "INSERT IGNORE INTO seckill_fence (resource, token, expires_at) VALUES (?, 0, ?)";
    pub const ANY_TO_FORGET: &str =
        "SELECT resource FROM seckill_fence WHERE expires_at <= ? LIMIT 1";
    pub const FORGET: &str = "DELETE FROM seckill_fence WHERE expires_at <= ?";
    /// Strictly newer tokens only: MySQL counts changed rows, not matched
    /// ones, so "the same token again" is read back separately.
    pub const ADVANCE: &str = "UPDATE seckill_fence SET token = ? WHERE resource = ? AND token < ?";
    pub const CURRENT: &str = "SELECT token FROM seckill_fence WHERE resource = ?";
}

impl WriteTx {
    /// Records `token` as the newest for `resource`, or returns false when
    /// the database has already seen a newer one (the caller must roll back:
    /// its lock was taken by someone else meanwhile). The same token again
    /// is accepted: one holder may write several times under one lock. A
    /// row made now may go at `expires_at`.
    ///
    /// The row stays locked (PostgreSQL, MySQL) or the file stays locked
    /// (SQLite) until the transaction ends, so a newer holder's check waits
    /// for this transaction and then sees its token.
    pub(crate) async fn fence(
        &mut self,
        resource: &str,
        token: u64,
        expires_at: DateTime<Utc>,
    ) -> Result<bool, DbError> {
        let token = i64::try_from(token).map_err(|_| {
            DbError::Other(sqlx::Error::Protocol(format!(
                "fencing token {token} does not fit a BIGINT"
            )))
        })?;
        let seed = match self.backend {
            Backend::Sqlite => sql::SEED_SQLITE,
            Backend::Postgres => sql::SEED_POSTGRES,
            Backend::MySql => sql::SEED_MYSQL,
        };
        sqlx::query(render(self.backend, seed))
            .bind(resource.to_owned())
            .bind(expires_at.timestamp_millis())
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        let advanced = sqlx::query(render(self.backend, sql::ADVANCE))
            .bind(token)
            .bind(resource.to_owned())
            .bind(token)
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        if advanced.rows_affected() > 0 {
            return Ok(true);
        }
        let newest: i64 = sqlx::query(render(self.backend, sql::CURRENT))
            .bind(resource.to_owned())
            .fetch_one(&mut *self.tx)
            .await
            .map_err(DbError::classify)?
            .try_get(0)?;
        Ok(newest == token)
    }
}

//! The order lifecycle's statements: read one order, end a pending one,
//! give its unit back, find what the expiry sweeper has to do.
//!
//! # Instances sharing the expiry backlog
//!
//! A sweep claims a batch of due orders inside the transaction that
//! expires them: on PostgreSQL and MySQL/MariaDB the claim is
//! `FOR UPDATE SKIP LOCKED`, so another instance's sweep passes over the
//! rows this one holds and claims the next ones; on SQLite the claim runs
//! under the file's write lock (`BEGIN IMMEDIATE`), so the next sweep reads
//! after this one has committed and finds the orders no longer pending.
//! Either way no order is claimed by two sweeps at once. MySQL's claim runs
//! at READ COMMITTED: at its default REPEATABLE READ a locking read also
//! locks the gaps of the index it scans, which would hold up the inserts of
//! new orders (and deadlock with them over the voucher row).

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::records::{status_of, stored_order_of_row, time_of_millis};
use super::{Backend, Db, DbError, Order, OrderStatus, StoredOrder, WriteTx, render};

mod sql {
    pub const SELECT_ORDER: &str =
        "SELECT id, user_id, voucher_id, created_at, status FROM voucher_order WHERE id = ?";
    /// The one way out of `pending`: whoever changes the row first decides.
    pub const END_PENDING: &str = "UPDATE voucher_order SET status = ?, status_at = ? \
         WHERE id = ? AND status = 'pending'";
    /// The version moves too: the version-column optimistic lock must see it.
    pub const RETURN_UNITS: &str =
        "UPDATE voucher SET stock = stock + ?, version = version + 1 WHERE id = ?";
    /// The oldest due orders; PostgreSQL and MySQL lock what they return
    /// and skip rows another transaction holds (see the module docs).
    pub const CLAIM_DUE_SQLITE: &str = "SELECT id, voucher_id FROM voucher_order \
         WHERE status = 'pending' AND created_at < ? ORDER BY created_at LIMIT ?";
    pub const CLAIM_DUE_LOCKING: &str = "SELECT id, voucher_id FROM voucher_order \
         WHERE status = 'pending' AND created_at < ? ORDER BY created_at LIMIT ? \
         FOR UPDATE SKIP LOCKED";
    /// Whether anything is due, read without a lock: an idle pass does not
    /// take SQLite's write lock.
    pub const ANY_DUE: &str = "SELECT id FROM voucher_order \
         WHERE status = 'pending' AND created_at < ? LIMIT 1";
    /// MySQL: no gap locks for the claim (see the module docs).
    pub const BEGIN_CLAIM_MYSQL: &str =
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";
    pub const STOCK_NOT_BACK: &str = "SELECT id, voucher_id FROM voucher_order \
         WHERE status IN ('cancelled', 'expired') AND stock_back = 0 LIMIT ?";
    pub const MARK_STOCK_BACK: &str = "UPDATE voucher_order SET stock_back = 1 WHERE id = ?";
    /// One statement, so stock and statuses are of one moment on every
    /// backend (a voucher without orders gives one row of NULLs).
    pub const STOCK_AND_ORDERS: &str = "SELECT v.stock, o.id, o.user_id, o.voucher_id, \
         o.created_at, o.status FROM voucher v LEFT JOIN voucher_order o ON o.voucher_id = v.id \
         WHERE v.id = ? ORDER BY o.id";
    pub const COUNT_BY_STATUS: &str =
        "SELECT status, COUNT(*) FROM voucher_order WHERE voucher_id = ? GROUP BY status";
}

impl Db {
    /// The order `id`, if it exists.
    ///
    /// # Errors
    /// Database failures, or a status seckill does not know.
    pub async fn order(&self, id: i64) -> Result<Option<StoredOrder>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_ORDER))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| stored_order_of_row(&row)).transpose()
    }

    /// The voucher's stock and every order of it with its status, read at
    /// one moment (orders may expire meanwhile: both sides of such a change
    /// are seen together or not at all); `None` when there is no voucher.
    ///
    /// # Errors
    /// Database failures, or a status seckill does not know.
    pub async fn stock_and_orders(
        &self,
        voucher_id: i64,
    ) -> Result<Option<(i64, Vec<StoredOrder>)>, DbError> {
        let rows = sqlx::query(self.sql(sql::STOCK_AND_ORDERS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let stock = first.try_get(0)?;
        let mut orders = Vec::with_capacity(rows.len());
        for row in &rows {
            if row.try_get::<Option<i64>, _>(1)?.is_none() {
                continue;
            }
            orders.push(StoredOrder {
                order: Order {
                    id: row.try_get(1)?,
                    user_id: row.try_get(2)?,
                    voucher_id: row.try_get(3)?,
                    created_at: time_of_millis(row.try_get(4)?)?,
                },
                status: status_of(row.try_get(5)?)?,
            });
        }
        Ok(Some((stock, orders)))
    }

    /// How many orders of `voucher_id` are in each status (absent: none).
    ///
    /// # Errors
    /// Database failures, or a status seckill does not know.
    pub async fn count_by_status(
        &self,
        voucher_id: i64,
    ) -> Result<Vec<(OrderStatus, i64)>, DbError> {
        let rows = sqlx::query(self.sql(sql::COUNT_BY_STATUS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| Ok((status_of(row.try_get(0)?)?, row.try_get(1)?)))
            .collect()
    }

    /// Ended orders whose unit is back in the database's stock but not yet
    /// in the Redis stock: `(order id, voucher id)`.
    pub(crate) async fn stock_not_back(&self, limit: u32) -> Result<Vec<(i64, i64)>, DbError> {
        let rows = sqlx::query(self.sql(sql::STOCK_NOT_BACK))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect()
    }

    /// Records that the order's unit is back in the Redis stock too.
    pub(crate) async fn mark_stock_back(&self, order_id: i64) -> Result<(), DbError> {
        let _gate = self.write_gate().await;
        sqlx::query(self.sql(sql::MARK_STOCK_BACK))
            .bind(order_id)
            .execute(&self.pool)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }

    /// Whether any pending order was created before `before`.
    pub(crate) async fn any_due(&self, before: DateTime<Utc>) -> Result<bool, DbError> {
        let row = sqlx::query(self.sql(sql::ANY_DUE))
            .bind(before.timestamp_millis())
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        Ok(row.is_some())
    }

    /// Starts the transaction in which a sweep claims due orders and
    /// expires them (see the module docs).
    pub(crate) async fn begin_claim(&self) -> Result<WriteTx, DbError> {
        match self.backend {
            Backend::MySql => {
                let tx = self
                    .pool
                    .begin_with(sql::BEGIN_CLAIM_MYSQL)
                    .await
                    .map_err(DbError::classify)?;
                Ok(WriteTx {
                    tx,
                    backend: self.backend,
                    _gate: None,
                })
            }
            Backend::Sqlite | Backend::Postgres => self.begin_write().await,
        }
    }
}

impl WriteTx {
    /// Pending orders created before `before`, oldest first, at most
    /// `limit`, that no other transaction holds: `(order id, voucher id)`.
    /// They stay claimed until the transaction ends.
    pub(crate) async fn claim_due(
        &mut self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(i64, i64)>, DbError> {
        let claim = match self.backend {
            Backend::Sqlite => sql::CLAIM_DUE_SQLITE,
            Backend::Postgres | Backend::MySql => sql::CLAIM_DUE_LOCKING,
        };
        let rows = sqlx::query(render(self.backend, claim))
            .bind(before.timestamp_millis())
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect()
    }

    /// The order `id`, read inside the transaction.
    pub(crate) async fn order(&mut self, id: i64) -> Result<Option<StoredOrder>, DbError> {
        let row = sqlx::query(render(self.backend, sql::SELECT_ORDER))
            .bind(id)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| stored_order_of_row(&row)).transpose()
    }

    /// Moves the order from `pending` to `status`; false when it was no
    /// longer pending (another request or the sweeper ended it first).
    pub(crate) async fn end_pending(
        &mut self,
        id: i64,
        status: OrderStatus,
        at: DateTime<Utc>,
    ) -> Result<bool, DbError> {
        let done = sqlx::query(render(self.backend, sql::END_PENDING))
            .bind(status.as_str())
            .bind(at.timestamp_millis())
            .bind(id)
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(done.rows_affected() > 0)
    }

    /// `stock = stock + units`: ended orders' units go back on sale.
    pub(crate) async fn return_units(
        &mut self,
        voucher_id: i64,
        units: i64,
    ) -> Result<(), DbError> {
        sqlx::query(render(self.backend, sql::RETURN_UNITS))
            .bind(units)
            .bind(voucher_id)
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }
}

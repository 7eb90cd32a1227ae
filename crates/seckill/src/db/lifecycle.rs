//! The order lifecycle's statements: read one order, end a pending one,
//! give its unit back, find what the expiry sweeper has to do.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Db, DbError, Order, WriteTx, render, time_of_millis};
use crate::lifecycle::OrderStatus;

/// An order as stored, with where it is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredOrder {
    /// Id, buyer, voucher, creation time.
    pub order: Order,
    /// Pending, paid, cancelled or expired.
    pub status: OrderStatus,
}

mod sql {
    pub const SELECT_ORDER: &str =
        "SELECT id, user_id, voucher_id, created_at, status FROM voucher_order WHERE id = ?";
    /// The one way out of `pending`: whoever changes the row first decides.
    pub const END_PENDING: &str = "UPDATE voucher_order SET status = ?, status_at = ? \
         WHERE id = ? AND status = 'pending'";
    /// The version moves too: the version-column optimistic lock must see it.
    pub const RETURN_UNIT: &str =
        "UPDATE voucher SET stock = stock + 1, version = version + 1 WHERE id = ?";
    pub const DUE_TO_EXPIRE: &str = "SELECT id FROM voucher_order \
         WHERE status = 'pending' AND created_at < ? ORDER BY created_at LIMIT ?";
    pub const STOCK_NOT_BACK: &str = "SELECT id, voucher_id FROM voucher_order \
         WHERE status IN ('cancelled', 'expired') AND stock_back = 0 LIMIT ?";
    pub const MARK_STOCK_BACK: &str = "UPDATE voucher_order SET stock_back = 1 WHERE id = ?";
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

    /// Pending orders created before `before`, oldest first, at most `limit`.
    pub(crate) async fn due_to_expire(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<i64>, DbError> {
        let rows = sqlx::query(self.sql(sql::DUE_TO_EXPIRE))
            .bind(before.timestamp_millis())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>(0).map_err(DbError::from))
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
}

impl WriteTx {
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

    /// `stock = stock + 1`: an ended order's unit goes back on sale.
    pub(crate) async fn return_unit(&mut self, voucher_id: i64) -> Result<(), DbError> {
        sqlx::query(render(self.backend, sql::RETURN_UNIT))
            .bind(voucher_id)
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }
}

fn stored_order_of_row(row: &AnyRow) -> Result<StoredOrder, DbError> {
    Ok(StoredOrder {
        order: Order {
            id: row.try_get(0)?,
            user_id: row.try_get(1)?,
            voucher_id: row.try_get(2)?,
            created_at: time_of_millis(row.try_get(3)?)?,
        },
        status: status_of(row.try_get(4)?)?,
    })
}

fn status_of(text: String) -> Result<OrderStatus, DbError> {
    text.parse()
        .map_err(|error: crate::lifecycle::status::UnknownStatus| {
            DbError::Other(sqlx::Error::Protocol(error.to_string()))
        })
}

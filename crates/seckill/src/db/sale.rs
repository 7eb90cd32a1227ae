//! Selling: the voucher and order statements the strategies, the API and
//! the load's verifier combine.

use sqlx::{AssertSqlSafe, Row, SqlSafeStr, SqlStr};

use super::records::{order_of_row, voucher_of_row};
use super::{Backend, Db, DbError, NewVoucher, Order, Voucher, WriteTx, render};
use crate::BoxError;

/// The statements, one text for every backend.
mod sql {
    pub const INSERT_VOUCHER: &str =
        "INSERT INTO voucher (title, stock, begin_at, end_at) VALUES (?, ?, ?, ?)";
    /// PostgreSQL has no `last_insert_id`, and sqlx's SQLite driver does not
    /// pass it through `Any`: their rendering appends this (SQLite >= 3.35).
    pub const RETURNING_ID: &str = " RETURNING id";
    pub const SELECT_VOUCHER: &str =
        "SELECT id, title, stock, begin_at, end_at FROM voucher WHERE id = ?";
    /// The newest vouchers, newest first (the caller reverses them);
    /// `LIMIT ?` binds on all three backends.
    pub const LIST_VOUCHERS: &str =
        "SELECT id, title, stock, begin_at, end_at FROM voucher ORDER BY id DESC LIMIT ?";
    pub const SELECT_STOCK: &str = "SELECT stock FROM voucher WHERE id = ?";
    pub const COUNT_USER_ORDERS: &str =
        "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = ? AND user_id = ?";
    pub const ORDER_OWNER: &str = "SELECT user_id, voucher_id FROM voucher_order WHERE id = ?";
    pub const DECREMENT: &str = "UPDATE voucher SET stock = stock - 1 WHERE id = ?";
    pub const DECREMENT_IF_LEFT: &str =
        "UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock > 0";
    pub const INSERT_ORDER: &str =
        "INSERT INTO voucher_order (id, user_id, voucher_id, created_at) VALUES (?, ?, ?, ?)";
    pub const LIST_ORDERS: &str = "SELECT id, user_id, voucher_id, created_at FROM voucher_order \
         WHERE voucher_id = ? ORDER BY id";
    pub const LIST_ORDERS_AFTER: &str = "SELECT id, user_id, voucher_id, created_at \
         FROM voucher_order WHERE voucher_id = ? AND id > ? ORDER BY id LIMIT ?";
    pub const COUNT_ORDERS: &str = "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = ?";
    pub const LIST_BUYERS: &str = "SELECT user_id FROM voucher_order WHERE voucher_id = ?";
    // The demo's optimistic-lock strategies (seed 004 §2).
    pub const SELECT_STOCK_VERSION: &str = "SELECT stock, version FROM voucher WHERE id = ?";
    pub const DECREMENT_IF_STOCK_IS: &str =
        "UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock = ?";
    pub const DECREMENT_IF_VERSION_IS: &str =
        "UPDATE voucher SET stock = stock - 1, version = version + 1 WHERE id = ? AND version = ?";
}

impl Db {
    /// The voucher `id`, if it exists.
    ///
    /// # Errors
    /// Database failures.
    pub async fn voucher(&self, id: i64) -> Result<Option<Voucher>, BoxError> {
        Ok(self.find_voucher(id).await?)
    }

    /// Every order of voucher `voucher_id`, by order id.
    ///
    /// # Errors
    /// Database failures.
    pub async fn orders(&self, voucher_id: i64) -> Result<Vec<Order>, BoxError> {
        Ok(self.list_orders(voucher_id).await?)
    }

    pub(crate) async fn find_voucher(&self, id: i64) -> Result<Option<Voucher>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_VOUCHER))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| voucher_of_row(&row)).transpose()
    }

    /// The newest `limit` vouchers, ordered by id (newest last), stock as
    /// the database has it.
    ///
    /// # Errors
    /// Database failures.
    pub(crate) async fn vouchers(&self, limit: u32) -> Result<Vec<Voucher>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_VOUCHERS))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        let mut vouchers = rows
            .iter()
            .map(voucher_of_row)
            .collect::<Result<Vec<_>, _>>()?;
        vouchers.reverse();
        Ok(vouchers)
    }

    pub(crate) async fn list_orders(&self, voucher_id: i64) -> Result<Vec<Order>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_ORDERS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter().map(order_of_row).collect()
    }

    /// Up to `limit` orders of `voucher_id` with ids above `after`, by id.
    pub(crate) async fn list_orders_after(
        &self,
        voucher_id: i64,
        after: i64,
        limit: u32,
    ) -> Result<Vec<Order>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_ORDERS_AFTER))
            .bind(voucher_id)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter().map(order_of_row).collect()
    }

    /// How many orders `voucher_id` has.
    pub(crate) async fn count_orders(&self, voucher_id: i64) -> Result<i64, DbError> {
        Ok(sqlx::query(self.sql(sql::COUNT_ORDERS))
            .bind(voucher_id)
            .fetch_one(&self.pool)
            .await
            .map_err(DbError::classify)?
            .try_get(0)?)
    }

    /// Stores a new voucher and returns its id.
    pub(crate) async fn insert_voucher(&self, voucher: &NewVoucher) -> Result<i64, DbError> {
        let query = |sql: SqlStr| {
            sqlx::query(sql)
                .bind(voucher.title.clone())
                .bind(voucher.stock)
                .bind(voucher.begin_at.timestamp_millis())
                .bind(voucher.end_at.timestamp_millis())
        };
        match self.backend {
            Backend::Postgres | Backend::Sqlite => {
                let _gate = self.write_gate().await;
                let sql = format!(
                    "{}{}",
                    self.sql(sql::INSERT_VOUCHER).as_str(),
                    sql::RETURNING_ID
                );
                let row = query(AssertSqlSafe(sql).into_sql_str())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(DbError::classify)?;
                row.try_get::<i64, _>(0).map_err(DbError::from)
            }
            Backend::MySql => {
                let done = query(self.sql(sql::INSERT_VOUCHER))
                    .execute(&self.pool)
                    .await
                    .map_err(DbError::classify)?;
                done.last_insert_id().ok_or_else(|| {
                    DbError::Other(sqlx::Error::Protocol(
                        "the database returned no id for the new voucher".to_owned(),
                    ))
                })
            }
        }
    }

    /// The voucher's stock, read outside any transaction.
    pub(crate) async fn stock(&self, voucher_id: i64) -> Result<Option<i64>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_STOCK))
            .bind(voucher_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| row.try_get::<i64, _>(0).map_err(DbError::from))
            .transpose()
    }

    /// Whether `user_id` already has an order of `voucher_id`, read outside
    /// any transaction.
    pub(crate) async fn has_order(&self, voucher_id: i64, user_id: i64) -> Result<bool, DbError> {
        let count: i64 = sqlx::query(self.sql(sql::COUNT_USER_ORDERS))
            .bind(voucher_id)
            .bind(user_id)
            .fetch_one(&self.pool)
            .await
            .map_err(DbError::classify)?
            .try_get(0)?;
        Ok(count > 0)
    }

    /// The user and voucher of the order with this id, if there is one,
    /// read outside any transaction.
    pub(crate) async fn order_owner(&self, order_id: i64) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(self.sql(sql::ORDER_OWNER))
            .bind(order_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
    }

    /// The users who have an order of `voucher_id`.
    pub(crate) async fn buyers(&self, voucher_id: i64) -> Result<Vec<i64>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_BUYERS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>(0).map_err(DbError::from))
            .collect()
    }

    /// The voucher's stock and version, read together outside any
    /// transaction (the `optimistic-version` strategy's snapshot).
    pub(crate) async fn stock_and_version(
        &self,
        voucher_id: i64,
    ) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_STOCK_VERSION))
            .bind(voucher_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
    }
}

impl WriteTx {
    /// The user and voucher of the order with this id, if there is one (the
    /// reserve consumer's idempotency check, which must tell the same order
    /// from another one that drew the same id).
    pub(crate) async fn order_owner(
        &mut self,
        order_id: i64,
    ) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(render(self.backend, sql::ORDER_OWNER))
            .bind(order_id)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
    }

    /// `stock = stock - 1`, whatever the stock: the naive strategy's write.
    /// Returns whether the voucher row exists.
    pub(crate) async fn decrement(&mut self, voucher_id: i64) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT, voucher_id, None).await
    }

    /// `stock = stock - 1 WHERE stock > 0`: returns false when none was left.
    pub(crate) async fn decrement_if_left(&mut self, voucher_id: i64) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_LEFT, voucher_id, None)
            .await
    }

    /// Inserts the order.
    pub(crate) async fn insert_order(&mut self, order: &Order) -> Result<(), DbError> {
        sqlx::query(render(self.backend, sql::INSERT_ORDER))
            .bind(order.id)
            .bind(order.user_id)
            .bind(order.voucher_id)
            .bind(order.created_at.timestamp_millis())
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }

    /// Runs one `UPDATE voucher ... WHERE id = ? [AND ... = ?]` of `sql`,
    /// with the value `seen` when its condition compares one; whether a row
    /// changed.
    async fn change_voucher(
        &mut self,
        sql: &'static str,
        voucher_id: i64,
        seen: Option<i64>,
    ) -> Result<bool, DbError> {
        let mut query = sqlx::query(render(self.backend, sql)).bind(voucher_id);
        if let Some(seen) = seen {
            query = query.bind(seen);
        }
        let done = query
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(done.rows_affected() > 0)
    }

    /// `stock = stock - 1 WHERE stock = seen`: compare-and-set on the stock
    /// read earlier. Returns false when the stock is no longer `seen`.
    pub(crate) async fn decrement_if_stock_is(
        &mut self,
        voucher_id: i64,
        seen: i64,
    ) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_STOCK_IS, voucher_id, Some(seen))
            .await
    }

    /// `stock = stock - 1, version = version + 1 WHERE version = seen`: the
    /// version-column optimistic lock. Returns false when another write
    /// bumped the version since it was read.
    pub(crate) async fn decrement_if_version_is(
        &mut self,
        voucher_id: i64,
        seen: i64,
    ) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_VERSION_IS, voucher_id, Some(seen))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered_in_order() {
        let rendered = render(Backend::Postgres, sql::COUNT_USER_ORDERS);
        assert_eq!(
            rendered.as_str(),
            "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = $1 AND user_id = $2"
        );
        let rendered = render(Backend::Postgres, sql::INSERT_ORDER);
        assert!(rendered.as_str().ends_with("VALUES ($1, $2, $3, $4)"));
    }

    #[test]
    fn other_backends_keep_question_marks() {
        assert_eq!(
            render(Backend::MySql, sql::DECREMENT).as_str(),
            sql::DECREMENT
        );
        assert_eq!(
            render(Backend::Sqlite, sql::DECREMENT).as_str(),
            sql::DECREMENT
        );
    }
}

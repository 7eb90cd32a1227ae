//! The rows seckill stores, as Rust values, and how a row reads into one.

use chrono::{DateTime, TimeZone, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

// Siblings by path, not through `db`'s re-exports: `db` re-exports this file.
use super::error::DbError;
use super::order_status::{OrderStatus, UnknownStatus};

/// A voucher on sale: `stock` units between `begin_at` and `end_at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voucher {
    /// Database id.
    pub id: i64,
    /// Shown to buyers.
    pub title: String,
    /// Units left, as the database sees them (lags behind Redis with the
    /// `reserve` strategy until the consumer has persisted accepted orders).
    pub stock: i64,
    /// Orders are accepted from this instant...
    pub begin_at: DateTime<Utc>,
    /// ...until this one (exclusive).
    pub end_at: DateTime<Utc>,
}

/// One order: one unit of one voucher for one user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// From the Redis id worker: unique and time-ordered across instances.
    pub id: i64,
    /// The buyer.
    pub user_id: i64,
    /// The voucher bought.
    pub voucher_id: i64,
    /// When the order was accepted.
    pub created_at: DateTime<Utc>,
}

/// The fields of a voucher about to be created.
#[derive(Clone, Debug)]
pub struct NewVoucher {
    /// Shown to buyers (1..=200 characters).
    pub title: String,
    /// Units on sale (>= 0).
    pub stock: i64,
    /// Start of the sale window.
    pub begin_at: DateTime<Utc>,
    /// End of the sale window (after `begin_at`).
    pub end_at: DateTime<Utc>,
}

/// An order as stored, with where it is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredOrder {
    /// Id, buyer, voucher, creation time.
    pub order: Order,
    /// Pending, paid, cancelled or expired.
    pub status: OrderStatus,
}

pub(super) fn voucher_of_row(row: &AnyRow) -> Result<Voucher, DbError> {
    Ok(Voucher {
        id: row.try_get(0)?,
        title: row.try_get(1)?,
        stock: row.try_get(2)?,
        begin_at: time_of_millis(row.try_get(3)?)?,
        end_at: time_of_millis(row.try_get(4)?)?,
    })
}

pub(super) fn order_of_row(row: &AnyRow) -> Result<Order, DbError> {
    Ok(Order {
        id: row.try_get(0)?,
        user_id: row.try_get(1)?,
        voucher_id: row.try_get(2)?,
        created_at: time_of_millis(row.try_get(3)?)?,
    })
}

pub(super) fn time_of_millis(millis: i64) -> Result<DateTime<Utc>, DbError> {
    Utc.timestamp_millis_opt(millis).single().ok_or_else(|| {
        DbError::Other(sqlx::Error::Protocol(format!(
            "stored time {millis} ms is out of range"
        )))
    })
}

pub(super) fn stored_order_of_row(row: &AnyRow) -> Result<StoredOrder, DbError> {
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

pub(super) fn status_of(text: String) -> Result<OrderStatus, DbError> {
    text.parse()
        .map_err(|error: UnknownStatus| DbError::Other(sqlx::Error::Protocol(error.to_string())))
}

//! Ending a pending order: pay, cancel, expire.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::redis_stock::{self, GivenBack};
use crate::db::{Db, DbError, OrderStatus, StoredOrder};

/// How a pending order ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Its buyer paid.
    Pay,
    /// Its buyer cancelled.
    Cancel,
    /// The payment timeout passed (the expiry sweeper).
    Expire,
}

impl End {
    /// The status the order ends in.
    pub fn status(self) -> OrderStatus {
        match self {
            End::Pay => OrderStatus::Paid,
            End::Cancel => OrderStatus::Cancelled,
            End::Expire => OrderStatus::Expired,
        }
    }
}

/// Why an order was not ended.
#[derive(Debug, thiserror::Error)]
pub enum TransitionError {
    /// No order with that id (a `reserve` order may not be written yet).
    #[error("no such order")]
    NotFound,
    /// The order belongs to another user.
    #[error("the order belongs to another user")]
    Forbidden,
    /// The order had already ended; here it is as it is now.
    #[error("the order is {}, no longer pending", .0.status)]
    NotPending(StoredOrder),
    /// The database failed.
    #[error(transparent)]
    Database(#[from] DbError),
}

/// Ends pending order `order_id` as `end` says, on behalf of `buyer` (the
/// user who must own it; `None` for the sweeper), and returns it as it is
/// now. A cancelled or expired order's unit goes back to the database's
/// stock in the same transaction, then to the Redis stock (`redis`: the
/// `reserve` strategy's; `None` for the others, which keep none).
///
/// A payment comes too late once `payment_timeout` has passed since the
/// order was placed, whether or not the sweeper has got to it yet: the order
/// expires then and there (its unit goes back) and the payment is refused
/// as [`TransitionError::NotPending`], the order now `expired`.
///
/// # Errors
/// See [`TransitionError`].
pub async fn end_order(
    db: &Db,
    redis: Option<&redlatch::RedisConnection>,
    order_id: i64,
    end: End,
    buyer: Option<i64>,
    payment_timeout: Duration,
) -> Result<StoredOrder, TransitionError> {
    let mut tx = db.begin_write().await?;
    let mut order = tx.order(order_id).await?.ok_or(TransitionError::NotFound)?;
    if buyer.is_some_and(|buyer| buyer != order.order.user_id) {
        return Err(TransitionError::Forbidden);
    }
    let overdue = end == End::Pay && is_overdue(&order, payment_timeout, Utc::now());
    let status = if overdue {
        OrderStatus::Expired
    } else {
        end.status()
    };
    if !tx.end_pending(order_id, status, Utc::now()).await? {
        return Err(TransitionError::NotPending(order));
    }
    if status.returns_stock() {
        tx.return_units(order.order.voucher_id, 1).await?;
    }
    tx.commit().await?;
    order.status = status;
    if status.returns_stock() {
        // Committed: the unit is back in the database. A failure from here
        // on is finished by the sweeper (`stock_back` is still 0).
        finish_give_back(db, redis, order.order.voucher_id, order_id).await;
    }
    crate::metrics::order_ended(status.as_str());
    if overdue {
        return Err(TransitionError::NotPending(order));
    }
    Ok(order)
}

/// Whether `order`'s payment deadline has passed at `now`.
fn is_overdue(order: &StoredOrder, payment_timeout: Duration, now: DateTime<Utc>) -> bool {
    let timeout = chrono::Duration::from_std(payment_timeout).unwrap_or(chrono::Duration::MAX);
    order
        .order
        .created_at
        .checked_add_signed(timeout)
        .is_some_and(|deadline| now >= deadline)
}

/// Gives an ended order's unit back to the Redis stock and records it;
/// logs (and leaves to the sweeper) what fails. Returns whether the
/// order's unit is now back everywhere. `redis` is `None` when the
/// instance's strategy keeps no Redis stock (only `reserve` does): the unit
/// is back once the database has it, and Redis, up or down, is not asked.
pub(crate) async fn finish_give_back(
    db: &Db,
    redis: Option<&redlatch::RedisConnection>,
    voucher_id: i64,
    order_id: i64,
) -> bool {
    let Some(redis) = redis else {
        return match db.mark_stock_back(order_id).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(order_id, %error, "seckill: cannot record the unit back; the sweeper will");
                false
            }
        };
    };
    match redis_stock::give_back(&mut redis.clone(), voucher_id, order_id).await {
        Ok(given) => {
            if given == GivenBack::Before {
                tracing::info!(
                    order_id,
                    "seckill: unit was already back in the Redis stock"
                );
            }
            match db.mark_stock_back(order_id).await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(order_id, %error, "seckill: cannot record the unit back in Redis; the sweeper will");
                    false
                }
            }
        }
        Err(error) => {
            tracing::warn!(order_id, %error, "seckill: cannot give the unit back to the Redis stock; the sweeper will");
            false
        }
    }
}

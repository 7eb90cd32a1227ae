//! Seed §4: the per-user lock lives in Redis (a redlatch lock named
//! `seckill:order:{voucher}:{user}`), so every instance excludes every other.
//!
//! Under the lock, one database transaction checks for an existing order,
//! decrements `WHERE stock > 0` and inserts; it commits before the lock is
//! released, so the next holder sees the order. A request waits at most
//! [`OrderContext::lock_wait`] (2 s by default) for the lock, then answers
//! busy (503): the holder is another click of the same user, whose answer
//! decides this one's anyway. If the lock is found lost before the commit
//! (the watchdog could not renew it), the transaction rolls back and the
//! request answers busy rather than write without exclusion.

use futures_util::future::BoxFuture;

use super::{OrderContext, OrderError, OrderId, Strategy};

/// A redlatch lock per user and voucher around one transaction.
pub struct RedisLock;

/// The lock name of a user's orders of a voucher.
pub fn lock_name(voucher_id: i64, user_id: i64) -> String {
    format!("seckill:order:{voucher_id}:{user_id}")
}

impl Strategy for RedisLock {
    fn order<'a>(
        &'a self,
        ctx: &'a OrderContext,
        voucher_id: i64,
        user_id: i64,
    ) -> BoxFuture<'a, Result<OrderId, OrderError>> {
        Box::pin(async move {
            ctx.check_sale_open(voucher_id).await?;
            ctx.check_stock_left(voucher_id).await?;
            let lock = ctx.locks.lock(lock_name(voucher_id, user_id));
            let guard = match lock.acquire_timeout(ctx.lock_wait).await {
                Ok(guard) => guard,
                Err(redlatch::Error::Timeout { waited, .. }) => {
                    return Err(OrderError::Busy(format!(
                        "another request of this user held the lock for {waited:?}"
                    )));
                }
                Err(other) => return Err(OrderError::Redis(other.to_string())),
            };
            let placed = async {
                let order = ctx.new_order(voucher_id, user_id).await?;
                let mut tx = ctx.db.begin_write().await?;
                if tx.has_order(voucher_id, user_id).await? {
                    return Err(OrderError::AlreadyOrdered);
                }
                if !tx.decrement_if_left(voucher_id).await? {
                    return Err(OrderError::SoldOut);
                }
                tx.insert_order(&order).await?;
                if !guard.is_held() {
                    return Err(OrderError::Busy(
                        "the user's lock was lost before the commit".to_owned(),
                    ));
                }
                tx.commit().await?;
                Ok(order.id)
            }
            .await;
            if let Err(error) = guard.release().await {
                // The order (if any) is committed; say that the lock had
                // lapsed, since another request may have overlapped.
                tracing::warn!(voucher_id, user_id, %error, "seckill: releasing the user's lock");
            }
            placed
        })
    }
}

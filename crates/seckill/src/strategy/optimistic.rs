//! Seed §2.1: the decrement carries its own condition, `WHERE stock > 0`.
//!
//! The database applies the check and the write as one statement under the
//! row lock, so the stock can no longer be oversold. The one-order-per-user
//! rule is still check-then-insert: a user's concurrent clicks all find no
//! order and all insert one (lab schema), or all but one get 409 from the
//! UNIQUE constraint (normal schema).

use futures_util::future::BoxFuture;

use super::contract::{OrderContext, OrderError, OrderId, Strategy, race_window};

/// Conditional decrement; per-user check without exclusion.
pub struct Optimistic;

impl Strategy for Optimistic {
    fn order<'a>(
        &'a self,
        ctx: &'a OrderContext,
        voucher_id: i64,
        user_id: i64,
    ) -> BoxFuture<'a, Result<OrderId, OrderError>> {
        Box::pin(async move {
            ctx.check_sale_open(voucher_id).await?;
            ctx.check_stock_left(voucher_id).await?;
            if ctx.db.has_order(voucher_id, user_id).await? {
                return Err(OrderError::AlreadyOrdered);
            }
            race_window().await;
            ctx.sell_if_left(voucher_id, user_id).await
        })
    }
}

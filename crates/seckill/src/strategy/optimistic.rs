//! Seed §2.1: the decrement carries its own condition, `WHERE stock > 0`.
//!
//! The database applies the check and the write as one statement under the
//! row lock, so the stock can no longer be oversold. The one-order-per-user
//! rule is still check-then-insert: a user's concurrent clicks all find no
//! order and all insert one (lab schema), or all but one get 409 from the
//! UNIQUE constraint (normal schema).

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy, race_window};

/// Conditional decrement; per-user check without exclusion.
pub struct Optimistic;

impl Strategy for Optimistic {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            ctx.check_stock_left(click.voucher_id).await?;
            if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                return Err(OrderError::AlreadyOrdered);
            }
            race_window().await;
            ctx.sell_if_left(click.voucher_id, click.user_id).await
        })
    }
}

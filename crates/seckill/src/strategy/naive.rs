//! Seed §1: read the stock, and if some is left, decrement and create the order.
//!
//! Between the read and the write, other requests read the same stock: with
//! one unit left, all of them see 1 and all of them decrement. With the lab
//! schema the stock goes below zero and users get several orders; with the
//! normal schema the CHECK and UNIQUE constraints refuse those writes (410/409).

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy, race_window};

/// Check-then-act on the stock, no per-user check.
pub struct Naive;

impl Strategy for Naive {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            ctx.check_stock_left(click.voucher_id).await?;
            race_window().await;
            let order = ctx.new_order(click.voucher_id, click.user_id).await?;
            // The write trusts the read above: `stock = stock - 1`, no condition.
            let mut tx = ctx.db.begin_write().await?;
            if !tx.decrement(click.voucher_id).await? {
                return Err(OrderError::NotFound);
            }
            tx.insert_order(&order).await?;
            tx.commit().await?;
            Ok(order.id)
        })
    }
}

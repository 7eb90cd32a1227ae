//! Seed §2.1, plan 1: compare-and-set on the stock itself. Read the stock,
//! then `UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock = ?`
//! with the value read; no row changed means someone sold a unit in between.
//!
//! It never oversells: the write applies only to the stock it was decided
//! on. But it is correct and unfair at once: when a hundred buyers read
//! stock 100 together, one decrement matches and ninety-nine find 99, so
//! they are refused with stock left (409 `conflict`). Under a rush most
//! buyers fail and units stay unsold; the seed moves on to `stock > 0`
//! (plan 2, [`optimistic`](super::optimistic)).
//!
//! The existing-order check is read after the stock, so a user's second
//! click either read the stock before the first one's commit (its compare
//! fails) or after it (it sees the order): no duplicates, as a side effect.
//! There is no retry loop (the seed's CAS spins; it does not): a refused
//! buyer clicks again. Once stock can come back, the compare is open to ABA
//! ([`optimistic_version`](super::optimistic_version) is not).

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy, race_window};

/// Compare-and-set on the stock value read.
pub struct OptimisticCompare;

impl Strategy for OptimisticCompare {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            let seen = ctx.check_stock_left(click.voucher_id).await?;
            if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                return Err(OrderError::AlreadyOrdered);
            }
            race_window().await;
            let order = ctx.new_order(click.voucher_id, click.user_id).await?;
            let mut tx = ctx.db.begin_write().await?;
            if !tx.decrement_if_stock_is(click.voucher_id, seen).await? {
                drop(tx);
                return Err(
                    refused(ctx, click.voucher_id, "the stock changed since it was read").await,
                );
            }
            tx.insert_order(&order).await?;
            tx.commit().await?;
            Ok(order.id)
        })
    }
}

/// Why an optimistic write matched no row: sold out when no stock is left
/// now, else a conflict with another buyer's write (`why`). The stock is
/// read again after the refused transaction, outside it.
pub(super) async fn refused(ctx: &OrderContext, voucher_id: i64, why: &str) -> OrderError {
    match ctx.check_stock_left(voucher_id).await {
        Ok(_) => OrderError::Conflict(why.to_owned()),
        Err(error) => error,
    }
}

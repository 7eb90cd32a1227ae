//! Seed §2's version column: read the stock and `voucher.version` together,
//! then `UPDATE voucher SET stock = stock - 1, version = version + 1
//! WHERE id = ? AND version = ?` with the version read. Any write since the
//! read bumped the version, so no row changes and the buyer is refused.
//!
//! It behaves like [`optimistic_compare`](super::optimistic_compare): never
//! oversold, no duplicates (the order check is read after the version), and
//! under a rush most buyers are refused with stock left (409 `conflict`).
//! What the column buys over the stock compare is immunity to ABA: once
//! stock can come back (a cancelled order returns its unit), the compare
//! can read 5, miss a sale to 4 and a return to 5, and match a stock that
//! moved; the version only grows. It also covers rows with several fields
//! that change.
//!
//! It is only as safe as the other writers of `stock`: one that does not
//! bump the version (another strategy's decrement; the lifecycle's stock
//! return does bump it) goes unseen, so a sale runs one strategy at a
//! time.

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy, race_window};
use super::optimistic_compare::refused;

/// Compare-and-set on the version column.
pub struct OptimisticVersion;

impl Strategy for OptimisticVersion {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            let seen_version = match ctx.db.stock_and_version(click.voucher_id).await? {
                None => return Err(OrderError::NotFound),
                Some((stock, _)) if stock < 1 => return Err(OrderError::SoldOut),
                Some((_, version)) => version,
            };
            if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                return Err(OrderError::AlreadyOrdered);
            }
            race_window().await;
            let order = ctx.new_order(click.voucher_id, click.user_id).await?;
            let mut tx = ctx.db.begin_write().await?;
            if !tx
                .decrement_if_version_is(click.voucher_id, seen_version)
                .await?
            {
                drop(tx);
                return Err(refused(
                    ctx,
                    click.voucher_id,
                    "the voucher's version changed since it was read",
                )
                .await);
            }
            tx.insert_order(&order).await?;
            tx.commit().await?;
            Ok(order.id)
        })
    }
}

//! Seed §3's transaction bug, with §4's lock: the per-user redlatch lock is
//! released *inside* the transaction, before it commits (the seed's
//! `synchronized` block inside a `@Transactional` method).
//!
//! Everything under the lock looks right: check for an order, decrement
//! `WHERE stock > 0`, insert. But the lock goes back while the order is
//! still uncommitted; the user's next click, waiting on that lock (on any
//! instance), takes it at once, finds no committed order and writes a
//! second one. The gap between release and commit is 20 ms here (a slow
//! commit, a log line, a GC pause in real life), so the lab schema gets duplicate orders of one user on every run;
//! the normal schema's UNIQUE refuses them (409). The stock is never
//! oversold: the decrement keeps its own `stock > 0` condition.
//!
//! As in [`local_lock`](super::local_lock), the order check is a plain read
//! outside the write transaction: on SQLite the next click's transaction
//! waits for this one's file lock, and a check inside it would see the
//! order. [`redis_lock`](super::redis_lock) is the fix: commit, then release.

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy};
use super::user_lock;

/// The gap between the release and the commit. Wider than the teaching
/// strategies' 2 ms race window: the waiting click must be woken by the
/// release, take the lock and read within it, and a busy machine takes a
/// few milliseconds for that.
const RELEASE_TO_COMMIT: std::time::Duration = std::time::Duration::from_millis(20);

/// How long at least a click waits for the user's lock.
const EARLY_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The per-user redlatch lock, released before the commit.
pub struct EarlyRelease;

impl Strategy for EarlyRelease {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            ctx.check_stock_left(click.voucher_id).await?;
            // It waits for the lock (2 s at least, whatever `--lock-wait` says):
            // the bug shows when the user's next click is queued on the lock
            // at the moment it is released.
            let wait = ctx.lock_wait.max(EARLY_RELEASE_WAIT);
            let guard = user_lock::acquire(
                ctx,
                &super::redis_lock::lock_name(click.voucher_id, click.user_id),
                wait,
            )
            .await?;
            let written = async {
                if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                    return Err(OrderError::AlreadyOrdered);
                }
                let order = ctx.new_order(click.voucher_id, click.user_id).await?;
                let mut tx = ctx.db.begin_write().await?;
                if !tx.decrement_if_left(click.voucher_id).await? {
                    return Err(OrderError::SoldOut);
                }
                tx.insert_order(&order).await?;
                Ok((tx, order.id))
            }
            .await;
            // The bug: let go of the lock first (on every path, as a
            // `finally` would), commit afterwards.
            if let Err(error) = guard.release().await {
                tracing::warn!(voucher_id = click.voucher_id, user_id = click.user_id, %error, "seckill: releasing the user's lock");
            }
            let (tx, order_id) = written?;
            tokio::time::sleep(RELEASE_TO_COMMIT).await;
            tx.commit().await?;
            Ok(order_id)
        })
    }
}

//! Seed §4: the per-user lock lives in Redis (a redlatch lock named
//! `seckill:order:{voucher}:{user}`), so every instance excludes every other.
//!
//! The seed's `tryLock()` does not wait: a click that finds the user's lock
//! held answers 409 `in_progress` at once (the holder is another click of
//! the same user, whose answer decides this one's anyway). `--lock-wait D`
//! waits up to D instead, then answers 503 `busy`.
//!
//! Under the lock, as in the seed: look for the user's order, then in one
//! transaction record the lock's fencing token for the lock name (the
//! database refuses a token older than one it has seen: see `db/fencing.rs`),
//! decrement `WHERE stock > 0` and insert; it commits before the lock is
//! released, so the next holder sees the order. A lock known lost before
//! the write (the watchdog could not renew it) answers 503 `lock_lost`; so
//! does a token the database refuses, which rolls the transaction back: the
//! holder stalled between its check and its write while another request of
//! the user took the lock and wrote. Nothing is written without exclusion.
//!
//! The fencing state of a user's lock (its `seckill_fence` row and its
//! token counter in Redis) goes with the sale, [`OrderContext::fence_keep`]
//! (10 min) after its end: the row by the expiry sweeper, the counter by a
//! Redis expiry. A write under the lock is refused as `ended` from half of
//! that on, however long its holder stalled, so no write can still need
//! the state when it goes; the other half is room for clocks that disagree.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy};
use super::user_lock;

/// A redlatch lock per user and voucher around one transaction.
pub struct RedisLock;

/// The lock name of a user's orders of a voucher (also the fenced resource).
pub fn lock_name(voucher_id: i64, user_id: i64) -> String {
    format!("seckill:order:{voucher_id}:{user_id}")
}

/// When the fencing state of a sale ending at `end_at` goes (never, for a
/// sale that ends at the end of time).
pub fn fence_expires_at(end_at: DateTime<Utc>, keep: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(keep)
        .ok()
        .and_then(|keep| end_at.checked_add_signed(keep))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// From when writes under a user's lock of a sale ending at `end_at` are
/// refused: half of `keep` after the end.
fn writes_refused_from(end_at: DateTime<Utc>, keep: Duration) -> DateTime<Utc> {
    fence_expires_at(end_at, keep / 2)
}

/// What `seckill serve --lab-stall-before-write` prints when it stalls.
pub const STALL_MARK: &str = "seckill: stalled before write";

impl Strategy for RedisLock {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            ctx.check_stock_left(click.voucher_id).await?;
            let name = lock_name(click.voucher_id, click.user_id);
            let forget_at = fence_expires_at(click.sale_ends_at, ctx.fence_keep);
            let guard = user_lock::acquire(ctx, &name, ctx.lock_wait).await?;
            let placed = async {
                // The seed's order: check under the lock, then write.
                if ctx.db.has_order(click.voucher_id, click.user_id).await? {
                    return Err(OrderError::AlreadyOrdered);
                }
                if !guard.is_held() {
                    return Err(OrderError::LockLost(
                        "the user's lock lapsed before the write".to_owned(),
                    ));
                }
                // Between the check and the write, the holder can stall past
                // its lease without knowing: only the fence catches that.
                if let Some(stall) = ctx.stall_before_write {
                    eprintln!("{STALL_MARK}");
                    tokio::time::sleep(stall).await;
                }
                let order = ctx.new_order(click.voucher_id, click.user_id).await?;
                let mut tx = ctx.db.begin_write().await?;
                // After a long stall the fencing state may be gone: too late.
                if Utc::now() >= writes_refused_from(click.sale_ends_at, ctx.fence_keep) {
                    return Err(OrderError::Ended);
                }
                if ctx.fencing && !tx.fence(&name, guard.token(), forget_at).await? {
                    return Err(OrderError::LockLost(format!(
                        "the database has seen a newer holder of the user's lock than token {}",
                        guard.token()
                    )));
                }
                if !tx.decrement_if_left(click.voucher_id).await? {
                    return Err(OrderError::SoldOut);
                }
                tx.insert_order(&order).await?;
                tx.commit().await?;
                Ok(order.id)
            }
            .await;
            if let Err(error) = guard.release().await {
                // The order (if any) is committed; say that the lock had
                // lapsed, since another request may have overlapped.
                tracing::warn!(voucher_id = click.voucher_id, user_id = click.user_id, %error, "seckill: releasing the user's lock");
            }
            placed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_ending_at_the_end_of_time_keeps_its_fencing_state() {
        let keep = Duration::from_secs(600);
        assert_eq!(
            fence_expires_at(DateTime::<Utc>::MAX_UTC, keep),
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            fence_expires_at(DateTime::<Utc>::UNIX_EPOCH, Duration::MAX),
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            writes_refused_from(DateTime::<Utc>::UNIX_EPOCH, keep).timestamp(),
            300
        );
    }
}

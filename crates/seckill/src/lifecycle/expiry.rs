//! The expiry sweeper: every instance looks for pending orders older than
//! the payment timeout and ends them as expired, and finishes giving units
//! back to the Redis stock where an instance died half way.
//!
//! Several instances sweeping at once is safe: each order ends once (the
//! conditional update), and the Redis give-back is once per order.
//!
//! A pass keeps going until nothing due is left, in batches that double
//! (100, 200, ... up to 1,600 orders a query), so a backlog (a sale's worth
//! of unpaid orders, a sweeper that was down) is cleared in one pass rather
//! than 100 orders per period: orders expire within about a tenth of the
//! payment timeout of their deadline, plus the time to write them.

use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::transition::{End, TransitionError, end_order, finish_give_back};
use crate::db::Db;

/// Orders handled by the first query of a pass.
const BATCH: u32 = 100;
/// The most one query asks for, as batches double.
const MAX_BATCH: u32 = 1_600;

/// How often to look: a tenth of the timeout, between 50 ms and 5 s, so an
/// order expires at most ~10 % late.
pub fn sweep_every(payment_timeout: Duration) -> Duration {
    (payment_timeout / 10).clamp(Duration::from_millis(50), Duration::from_secs(5))
}

/// Runs until `shutdown`; calls `returned(voucher_id)` for each unit given
/// back (the instance's sold-out flag listens).
pub async fn run(
    db: Db,
    redis: Option<redlatch::RedisConnection>,
    payment_timeout: Duration,
    shutdown: CancellationToken,
    returned: impl Fn(i64) + Send,
) {
    let every = sweep_every(payment_timeout);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(error) = sweep(&db, redis.as_ref(), payment_timeout, &returned).await {
            tracing::warn!(%error, "seckill: expiry sweep failed; trying again");
        }
    }
}

/// One pass: expire what is due, then finish interrupted give-backs.
/// Returns how many orders it expired.
///
/// # Errors
/// Database failures of the queries (single orders that fail are logged
/// and retried on the next pass).
pub async fn sweep(
    db: &Db,
    redis: Option<&redlatch::RedisConnection>,
    payment_timeout: Duration,
    returned: &(impl Fn(i64) + Send),
) -> Result<usize, crate::db::DbError> {
    let timeout = chrono::Duration::from_std(payment_timeout).unwrap_or(chrono::Duration::MAX);
    let before = Utc::now()
        .checked_sub_signed(timeout)
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC);
    let mut expired = 0;
    let mut batch = BATCH;
    loop {
        let due = db.due_to_expire(before, batch).await?;
        let drained = due.len() < batch as usize;
        let mut ended = 0;
        for order_id in due {
            match end_order(db, redis, order_id, End::Expire, None, payment_timeout).await {
                Ok(order) => {
                    expired += 1;
                    ended += 1;
                    returned(order.order.voucher_id);
                }
                // Paid or cancelled since the query: nothing to do.
                Err(TransitionError::NotPending(_) | TransitionError::NotFound) => {}
                Err(error) => tracing::warn!(order_id, %error, "seckill: cannot expire the order"),
            }
        }
        // Stop when all is done, or when a batch ended nothing (failing
        // orders, or another instance ahead of us): the next pass retries.
        if drained || ended == 0 {
            break;
        }
        batch = (batch * 2).min(MAX_BATCH);
    }
    for (order_id, voucher_id) in db.stock_not_back(BATCH).await? {
        if finish_give_back(db, redis, voucher_id, order_id).await {
            returned(voucher_id);
        }
    }
    Ok(expired)
}

//! The expiry sweeper: every instance looks for pending orders older than
//! the payment timeout and ends them as expired, finishes giving units
//! back to the Redis stock where an instance died half way, and deletes
//! the fencing rows whose sale is long over.
//!
//! Several instances sweeping at once share the work: each batch is
//! claimed and expired in one transaction, and a batch another instance
//! has claimed is passed over (`FOR UPDATE SKIP LOCKED`; on SQLite the
//! sweeps take turns at the write lock), so no order is tried by two
//! sweeps. Each order still ends once (the conditional update), its unit
//! goes back to the database's stock in the same transaction, and the Redis
//! give-back is once per order.
//!
//! A pass keeps going until nothing due is left, in batches that double
//! (100, 200, ... up to 1,600 orders a transaction), so a backlog (a sale's
//! worth of unpaid orders, a sweeper that was down) is cleared in one pass
//! rather than 100 orders per period: orders expire within about a tenth of
//! the payment timeout of their deadline, plus the time to write them.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::transition::finish_give_back;
use crate::db::{Db, OrderStatus};

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

/// One pass: expire what is due, finish interrupted give-backs, and delete
/// the fencing rows of sales long over.
/// Returns how many orders it expired.
///
/// # Errors
/// Database failures (a batch that fails is rolled back whole and tried
/// again on the next pass).
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
    // An idle pass only reads (SQLite's write lock stays free for orders).
    while db.any_due(before).await? {
        let (claimed, ended) = expire_batch(db, before, batch).await?;
        for &(order_id, voucher_id) in &ended {
            crate::metrics::order_ended(OrderStatus::Expired.as_str());
            // Committed: a failure from here on is finished by the next
            // pass (`stock_back` is still 0).
            finish_give_back(db, redis, voucher_id, order_id).await;
            returned(voucher_id);
        }
        expired += ended.len();
        // Stop when all is done (or the rest is claimed by another
        // instance), or when a batch ended nothing: the next pass retries.
        if claimed < batch as usize || ended.is_empty() {
            break;
        }
        batch = (batch * 2).min(MAX_BATCH);
    }
    for (order_id, voucher_id) in db.stock_not_back(BATCH).await? {
        if finish_give_back(db, redis, voucher_id, order_id).await {
            returned(voucher_id);
        }
    }
    // Fencing rows of sales long over (db/fencing.rs).
    db.forget_fences(Utc::now()).await?;
    Ok(expired)
}

/// Claims up to `limit` orders due before `before` and expires them in one
/// transaction, their units back in the database's stock; returns how many
/// it claimed and the `(order id, voucher id)` it expired.
async fn expire_batch(
    db: &Db,
    before: DateTime<Utc>,
    limit: u32,
) -> Result<(usize, Vec<(i64, i64)>), crate::db::DbError> {
    let mut tx = db.begin_claim().await?;
    let claimed = tx.claim_due(before, limit).await?;
    let now = Utc::now();
    let mut ended = Vec::with_capacity(claimed.len());
    let mut units: BTreeMap<i64, i64> = BTreeMap::new();
    for &(order_id, voucher_id) in &claimed {
        if tx.end_pending(order_id, OrderStatus::Expired, now).await? {
            ended.push((order_id, voucher_id));
            *units.entry(voucher_id).or_default() += 1;
        }
    }
    // One update per voucher, in id order: two sweeps lock vouchers in the
    // same order, so they never wait on each other in a cycle.
    for (voucher_id, count) in units {
        tx.return_units(voucher_id, count).await?;
    }
    tx.commit().await?;
    Ok((claimed.len(), ended))
}

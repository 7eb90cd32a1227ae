//! Taking a user's redlatch lock (named by [`redis_lock::lock_name`]) and
//! turning the ways it can fail into order answers.
//!
//! Shared by the strategies that hold the per-user lock of seed §4 so that
//! they wait and fail alike; they differ in *when* they let go of it.

use std::time::Duration;

use tokio::time::Instant;

use chrono::{DateTime, Utc};
use redlatch::Guard;

use super::contract::{OrderContext, OrderError};

/// The lock `name`: with a zero `wait`, at once or not at all (the seed's
/// `tryLock()`: in progress, 409, when another request of the user holds
/// it); otherwise within `wait` (busy, 503, when it stayed held). Redis
/// failures answer 503 too. The lock's fencing counter expires at
/// `forget_at` (see [`expire_counter`]).
///
/// One deadline for the grab: the lock (its attempts and retries) and the
/// counter's expiry fit in the Redis response timeout, or in `wait` when
/// that is longer. A stalled Redis answers 503 then, not after a response
/// timeout per call in a row.
pub(super) async fn acquire(
    ctx: &OrderContext,
    name: &str,
    wait: Duration,
    forget_at: DateTime<Utc>,
) -> Result<Guard, OrderError> {
    let budget = wait.max(ctx.locks.settings().response_timeout);
    // `None`: a wait too long to represent, which never runs out.
    let deadline = Instant::now().checked_add(budget);
    let guard = take(ctx, name, wait, budget).await?;
    if guard.token() == 1 {
        let left = deadline.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        });
        if tokio::time::timeout(left, expire_counter(ctx, name, forget_at))
            .await
            .is_err()
        {
            tracing::warn!(
                name,
                "seckill: no time left to set the fencing counter's expiry"
            );
        }
    }
    Ok(guard)
}

/// The lock's fencing counter, `redisson_lock_token:{PREFIX+NAME}` (the
/// key redlatch documents), goes with the sale: its expiry is set when an
/// acquisition created it (token 1), and the INCRs of later ones keep it.
/// A failure is logged: the counter then stays, as it did before.
async fn expire_counter(ctx: &OrderContext, name: &str, at: DateTime<Utc>) {
    let key = format!(
        "redisson_lock_token:{{{}{name}}}",
        ctx.locks.settings().key_prefix
    );
    let set: redis::RedisResult<i64> = redis::cmd("PEXPIREAT")
        .arg(&key)
        .arg(at.timestamp_millis())
        .query_async(&mut ctx.redis.clone())
        .await;
    if let Err(error) = set {
        tracing::warn!(%key, %error, "seckill: cannot set the fencing counter's expiry");
    }
}

/// The lock itself, within `budget`: a bounded wait is bounded by the
/// library; a single try (which retries a call Redis did not answer) is cut
/// off here, which leaves nothing behind (an attempt in flight is given
/// back in the background).
async fn take(
    ctx: &OrderContext,
    name: &str,
    wait: Duration,
    budget: Duration,
) -> Result<Guard, OrderError> {
    let lock = ctx.locks.lock(name);
    if wait.is_zero() {
        return match tokio::time::timeout(budget, lock.try_acquire()).await {
            Ok(Ok(Some(guard))) => Ok(guard),
            Ok(Ok(None)) => Err(OrderError::InProgress),
            Ok(Err(other)) => Err(OrderError::Redis(other.to_string())),
            Err(_) => Err(OrderError::Redis(format!(
                "redis did not answer the user's lock within {budget:?}"
            ))),
        };
    }
    match lock.acquire_timeout(wait).await {
        Ok(guard) => Ok(guard),
        Err(redlatch::Error::Timeout { waited, .. }) => Err(OrderError::Busy(format!(
            "another request of this user held the lock for {waited:?}"
        ))),
        Err(other) => Err(OrderError::Redis(other.to_string())),
    }
}

//! Taking a user's redlatch lock (named by [`redis_lock::lock_name`]) and
//! turning the ways it can fail into order answers.
//!
//! Shared by the strategies that hold the per-user lock of seed §4 so that
//! they wait and fail alike; they differ in *when* they let go of it.

use std::time::Duration;

use redlatch::Guard;

use super::contract::{OrderContext, OrderError};

/// The lock `name`: with a zero `wait`, at once or not at all (the seed's
/// `tryLock()`: in progress, 409, when another request of the user holds
/// it); otherwise within `wait` (busy, 503, when it stayed held). Redis
/// failures answer 503 too. The lock leaves no key behind once released
/// (redlatch's fencing counter is shared by every lock of the server), so
/// nothing of it needs to expire with the sale.
///
/// One deadline for the grab: the lock (its attempts and retries) fits in
/// the Redis response timeout, or in `wait` when that is longer. A stalled
/// Redis answers 503 then, not after a response timeout per call in a row.
pub(super) async fn acquire(
    ctx: &OrderContext,
    name: &str,
    wait: Duration,
) -> Result<Guard, OrderError> {
    let budget = wait.max(ctx.locks.settings().response_timeout);
    take(ctx, name, wait, budget).await
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

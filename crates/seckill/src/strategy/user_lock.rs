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
/// One deadline for the grab: the library bounds a wait (its attempts,
/// retries and back-offs) by `wait`; a single try (a zero wait), which
/// rides out a call Redis did not answer with retries, is cut off here
/// after one response timeout (past `wait` by that much: never before the
/// library's own bound), which leaves nothing behind (an attempt in flight
/// is given back in the background). A stalled Redis answers 503 then, not
/// after a response timeout per call in a row.
pub(super) async fn acquire(
    ctx: &OrderContext,
    name: &str,
    wait: Duration,
) -> Result<Guard, OrderError> {
    let budget = wait.saturating_add(ctx.locks.settings().response_timeout);
    let lock = ctx.locks.lock(name);
    match tokio::time::timeout(budget, lock.acquire_within(Some(wait))).await {
        Ok(Ok(guard)) => Ok(guard),
        Ok(Err(redlatch::Error::Timeout { .. })) if wait.is_zero() => Err(OrderError::InProgress),
        Ok(Err(redlatch::Error::Timeout { waited, .. })) => Err(OrderError::Busy(format!(
            "another request of this user held the lock for {waited:?}"
        ))),
        Ok(Err(other)) => Err(OrderError::Redis(other.to_string())),
        Err(_) => Err(OrderError::Redis(format!(
            "redis did not answer the user's lock within {budget:?}"
        ))),
    }
}

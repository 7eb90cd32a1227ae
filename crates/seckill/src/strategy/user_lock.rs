//! Taking a user's redlatch lock (named by [`redis_lock::lock_name`]) and
//! turning the ways it can fail into order answers.
//!
//! Shared by the strategies that hold the per-user lock of seed §4 so that
//! they wait and fail alike; they differ in *when* they let go of it.

use std::time::Duration;

use redlatch::Guard;

use super::{OrderContext, OrderError};

/// The lock `name`: with a zero `wait`, at once or not at all (the seed's
/// `tryLock()`: in progress, 409, when another request of the user holds
/// it); otherwise within `wait` (busy, 503, when it stayed held). Redis
/// failures answer 503 too.
pub(super) async fn acquire(
    ctx: &OrderContext,
    name: &str,
    wait: Duration,
) -> Result<Guard, OrderError> {
    let lock = ctx.locks.lock(name);
    if wait.is_zero() {
        return match lock.try_acquire().await {
            Ok(Some(guard)) => Ok(guard),
            Ok(None) => Err(OrderError::InProgress),
            Err(other) => Err(OrderError::Redis(other.to_string())),
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

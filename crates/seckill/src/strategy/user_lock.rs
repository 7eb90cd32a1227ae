//! Taking a user's redlatch lock (named by [`redis_lock::lock_name`]) and
//! turning the ways it can fail into order answers.
//!
//! Shared by the strategies that hold the per-user lock of seed §4 so that
//! they wait and fail alike; they differ in *when* they let go of it.

use redlatch::Guard;

use super::redis_lock::lock_name;
use super::{OrderContext, OrderError};

/// Waits at most [`OrderContext::lock_wait`] for the lock of `user_id` on
/// `voucher_id`. Busy (503) when another request of this user held it all
/// that time; Redis (503) when Redis failed.
pub(super) async fn acquire(
    ctx: &OrderContext,
    voucher_id: i64,
    user_id: i64,
) -> Result<Guard, OrderError> {
    let lock = ctx.locks.lock(lock_name(voucher_id, user_id));
    match lock.acquire_timeout(ctx.lock_wait).await {
        Ok(guard) => Ok(guard),
        Err(redlatch::Error::Timeout { waited, .. }) => Err(OrderError::Busy(format!(
            "another request of this user held the lock for {waited:?}"
        ))),
        Err(other) => Err(OrderError::Redis(other.to_string())),
    }
}

//! Renewal of a Redlock hold: a task per held Redlock lock that extends the
//! lease on every node at once, and counts a renewal only when a majority
//! confirms it within the validity.

use std::sync::Arc;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::engine::hold::LostReason;
use crate::error::Error;
use crate::redlock::guard::RedlockHold;

/// Starts the task that keeps `shared` alive (or, for a fixed lease, marks
/// it lost when the lease runs out). It ends when the last guard is
/// released or the hold is lost.
pub(crate) fn start(shared: Arc<RedlockHold>, acquired_at: LeaseInstant) {
    let runtime = shared.runtime.clone();
    runtime.spawn(async move {
        if shared.hold.renewed {
            keep_renewed(&shared, acquired_at).await;
        } else {
            run_out(&shared).await;
        }
    });
}

/// A third of the lease, as for single-server locks.
fn period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).max(1))
}

async fn keep_renewed(shared: &RedlockHold, acquired_at: LeaseInstant) {
    let hold = &shared.hold;
    let mut next = acquired_at + period(hold.lease_ms());
    loop {
        let wake = next.min(hold.valid_until());
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            _ = hold.lost_token().cancelled() => return,
            _ = wake.sleep_until() => {}
        }
        if LeaseInstant::now() >= hold.valid_until() {
            hold.mark_lost(LostReason::NotRenewed);
            return;
        }
        let lease_ms = hold.lease_ms();
        let renewed = tokio::select! {
            _ = shared.stop.cancelled() => return,
            renewed = shared.renew(lease_ms) => renewed,
        };
        match renewed {
            Ok(()) => next = LeaseInstant::now() + period(lease_ms),
            Err(Error::NotHeld { .. }) => {
                tracing::warn!(lock = %shared.name, "redlatch: Redlock lost: gone on too many nodes");
                return;
            }
            Err(error) => {
                tracing::debug!(lock = %shared.name, %error, "redlatch: Redlock renewal did not count, retrying");
                // Try again soon; the validity deadline above still marks it lost in time.
                next = LeaseInstant::now() + shared.node_timeout.max(Duration::from_millis(10));
            }
        }
    }
}

async fn run_out(shared: &RedlockHold) {
    let hold = &shared.hold;
    loop {
        let until = hold.valid_until();
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            _ = hold.lost_token().cancelled() => return,
            _ = until.sleep_until() => {}
        }
        // `extend` may have moved the deadline while we slept.
        if LeaseInstant::now() >= hold.valid_until() {
            hold.mark_lost(LostReason::LeaseRanOut);
            return;
        }
    }
}

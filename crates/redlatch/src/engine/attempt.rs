//! One acquire attempt of the reentrant lock, in a task of its own, so that
//! dropping the caller's future never cuts the script call off halfway: the
//! outcome is handed over as a claim that gives its hold back unless taken
//! ([`crate::engine::cancel::hand_over`]).

use tracing::debug;

use crate::engine::Core;
use crate::engine::cancel::hand_over;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::scripts::lock::{self, Attempt, Request};
use crate::transport::bounded;

/// One attempt of the acquire script. One round trip.
///
/// If the caller drops the returned future, the attempt still completes and
/// any hold it took is released again.
pub(crate) async fn attempt(inner: &Core, request: &Request) -> Result<Attempt> {
    let mut conn = inner.conn.clone();
    let mut undo_conn = inner.conn.clone();
    let request = request.clone();
    let undo_request = request.clone();
    let limit = inner.current_settings().response_timeout;
    let replica_wait = inner.replica_wait;
    let call = async move {
        let sent_at = LeaseInstant::now();
        let outcome = match replica_wait {
            None => {
                bounded(
                    "acquire",
                    limit,
                    lock::acquire(&mut conn, &request, sent_at),
                )
                .await
            }
            Some(wait) => lock::acquire_replicated(&mut conn, &request, sent_at, limit, wait).await,
        };
        if matches!(&outcome, Err(error) if error.is_transient()) && !request.named_owner {
            // A broken connection leaves the outcome unknown; an anonymous
            // owner is unique to this attempt, so giving back whatever it may
            // hold is always safe.
            debug!(lock = %request.keys.key, "redlatch: undoing an acquire attempt of unknown outcome");
            let _ = lock::release(&mut conn, &request, limit).await;
        }
        outcome
    };
    let undo = move |outcome: Result<Attempt>| async move {
        if matches!(outcome, Ok(Attempt::Acquired { .. })) {
            debug!(lock = %undo_request.keys.key, "redlatch: undoing an abandoned acquire attempt");
            let _ = lock::release(&mut undo_conn, &undo_request, limit).await;
        }
    };
    hand_over(&inner.runtime, "acquire", call, undo).await
}

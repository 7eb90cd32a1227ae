//! One acquire attempt of the reentrant lock: dropping the caller's future
//! never cuts the script call off halfway; the call then runs to its end in
//! the background and gives back the hold it took
//! ([`crate::engine::cancel::hand_over`]).

use std::future::Future;
use std::time::Duration;

use tracing::debug;

use crate::engine::Core;
use crate::engine::cancel::{hand_over, spawn_undo, until_answered};
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::scripts::lock::{self, Attempt, Request};
use crate::settings::RetryPolicy;
use crate::transport::Connection;

/// One attempt of the acquire script. One round trip.
///
/// If the caller drops the returned future, the attempt still completes and
/// any hold it took is released again. The call is boxed, so the future
/// stays small while a waiter holds it.
pub(crate) fn attempt(
    inner: &Core,
    request: &Request,
) -> impl Future<Output = Result<Attempt>> + Send + 'static {
    let mut conn = inner.conn.clone();
    let request = request.clone();
    let undo_request = request.clone();
    let settings = inner.current_settings();
    let (limit, retry) = (settings.response_timeout, settings.retry);
    let replica_wait = inner.replica_wait;
    let background = inner.background.clone();
    let undo_conn = inner.conn.clone();
    let coalesced = inner.lock_calls.as_ref().map(|calls| calls.acquire.clone());
    let call = async move {
        let sent_at = LeaseInstant::now();
        let outcome = match (replica_wait, coalesced) {
            (Some(wait), _) => {
                lock::acquire_replicated(&mut conn, &request, sent_at, limit, wait).await
            }
            // With the other acquires of this client under way now, in one call.
            (None, Some(calls)) => calls.call(request.clone()).await,
            (None, None) => lock::acquire(&mut conn, &request, sent_at, limit).await,
        };
        if matches!(&outcome, Err(error) if error.is_transient()) && !request.named_owner {
            // A broken connection leaves the outcome unknown; an anonymous
            // owner is unique to this attempt, so giving back whatever it may
            // hold is always safe. The connection may still be down: keep
            // trying in the background until Redis answers or the lease ends.
            debug!(lock = %request.keys.key, "redlatch: undoing an acquire attempt of unknown outcome");
            let deadline = sent_at + Duration::from_millis(request.lease_ms);
            spawn_undo(
                &background,
                give_back(conn, request, limit, retry, deadline),
            );
        }
        outcome
    };
    let undo = move |outcome: Result<Attempt>| async move {
        if let Ok(Attempt::Acquired { sent_at, .. }) = outcome {
            debug!(lock = %undo_request.keys.key, "redlatch: undoing an abandoned acquire attempt");
            if undo_request.named_owner {
                // Maybe a re-entry: one release, never repeated.
                let mut conn = undo_conn;
                let _ = lock::release(&mut conn, &undo_request, limit).await;
            } else {
                let deadline = sent_at + Duration::from_millis(undo_request.lease_ms);
                give_back(undo_conn, undo_request, limit, retry, deadline).await;
            }
        }
    };
    hand_over(&inner.background, call, undo)
}

/// Releases an anonymous owner's hold, until Redis answers or `deadline`.
async fn give_back(
    conn: Connection,
    request: Request,
    limit: Duration,
    retry: RetryPolicy,
    deadline: LeaseInstant,
) {
    until_answered("acquire undo", retry, deadline, || {
        let (mut conn, request) = (conn.clone(), request.clone());
        async move { lock::release(&mut conn, &request, limit).await }
    })
    .await;
}

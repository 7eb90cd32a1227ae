//! One acquire attempt of the reentrant lock, in a task of its own, so that
//! dropping the caller's future never cuts the script call off halfway: the
//! task finishes and, when nobody is left to take the result, undoes what it did.

use std::time::Instant;

use tokio::sync::oneshot;
use tracing::debug;

use crate::engine::Core;
use crate::error::{Error, Result};
use crate::scripts::lock::{self, Attempt, Request};
use crate::transport::bounded;

/// One attempt of the acquire script. One round trip.
///
/// If the caller drops the returned future, the attempt still completes and
/// any hold it took is released again.
pub(crate) async fn attempt(inner: &Core, request: &Request) -> Result<Attempt> {
    let (reply_to, reply) = oneshot::channel();
    let mut conn = inner.conn.clone();
    let request = request.clone();
    let limit = inner.current_settings().response_timeout;
    let replica_wait = inner.replica_wait;
    inner.runtime.spawn(async move {
        let sent_at = Instant::now();
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
        let uncertain = matches!(&outcome, Err(error) if error.is_transient());
        // `send` hands the outcome back when the caller is gone.
        let abandoned = reply_to.send(outcome).err();
        let took_hold = matches!(abandoned, Some(Ok(Attempt::Acquired { .. })));
        // A broken connection leaves the outcome unknown; an anonymous owner is
        // unique to this attempt, so giving its hold back is always safe.
        if took_hold || (uncertain && !request.named_owner) {
            debug!(lock = %request.keys.key, "redlatch: undoing an abandoned acquire attempt");
            let _ = lock::release(&mut conn, &request, limit).await;
        }
    });
    reply.await.map_err(|_| Error::Protocol {
        op: "acquire",
        detail: "the runtime shut down during the call".to_owned(),
    })?
}

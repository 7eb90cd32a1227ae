//! Script calls that outlive their caller.
//!
//! An acquire attempt runs in a task of its own, so that dropping the
//! caller's future never cuts a script call off halfway. When the caller is
//! gone by the time the answer comes, the task undoes what the call did (gives
//! back a hold, leaves a queue), so a cancelled acquire leaves nothing behind.

use std::future::Future;

use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// Runs `call` on `runtime` and returns its outcome. If the caller drops this
/// future first, `undo` gets the outcome nobody took, and its future runs.
pub(crate) async fn detached<T, C, F, U>(
    runtime: &tokio::runtime::Handle,
    op: &'static str,
    call: C,
    undo: F,
) -> Result<T>
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
    F: FnOnce(Result<T>) -> U + Send + 'static,
    U: Future<Output = ()> + Send + 'static,
{
    let (reply_to, reply) = oneshot::channel();
    runtime.spawn(async move {
        let outcome = call.await;
        if let Err(abandoned) = reply_to.send(outcome) {
            undo(abandoned).await;
        }
    });
    reply.await.map_err(|_| Error::Protocol {
        op,
        detail: "the runtime shut down during the call".to_owned(),
    })?
}

//! A waiter's wait-for edge in Redis, as one value: deleted when the wait
//! ends. Awaited where the wait loop returns on its own (acquired, gave
//! up, refused), so that a party that goes on leaves no edge behind it;
//! from a task of its own when dropped (a cancelled acquire, an error), as
//! [`Place`](crate::engine::place::Place) withdraws a place in line. An
//! edge that could not be deleted expires (its PX is tied to the wait).

use std::future::Future;
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use crate::engine::cancel::{run_to_end, spawn_undo};
use crate::engine::context::Core;
use crate::lease_clock::LeaseInstant;

/// The edge key one waiter wrote, while it may stand. Small: a parked
/// waiter keeps it.
pub(crate) struct WaitEdge {
    core: Arc<Core>,
    /// `None` once deleted or forgotten.
    key: Option<Box<str>>,
    /// When a check last wrote it.
    checked: LeaseInstant,
}

impl WaitEdge {
    /// The edge at `key`, written (or about to be) by this waiter.
    pub(crate) fn new(core: Arc<Core>, key: String) -> WaitEdge {
        WaitEdge {
            core,
            key: Some(key.into_boxed_str()),
            checked: LeaseInstant::now(),
        }
    }

    /// A check wrote the edge again now.
    pub(crate) fn checked_now(&mut self) {
        self.checked = LeaseInstant::now();
    }

    /// A check wrote it less than `every` ago: the next may wait.
    pub(crate) fn checked_within(&self, every: Duration) -> bool {
        self.checked.elapsed() < every
    }

    /// The edge's key.
    pub(crate) fn key(&self) -> &str {
        self.key.as_deref().unwrap_or_default()
    }

    /// The script deleted the edge already (it found a cycle).
    pub(crate) fn forget(mut self) {
        self.key = None;
    }

    /// Deletes the edge now, waiting `grace` at most: the delete goes on
    /// past it in the background (a stalled server).
    pub(crate) async fn remove(mut self, grace: Duration) {
        let Some(key) = self.key.take() else {
            return;
        };
        let delete = delete(&self.core, key);
        let _ = tokio::time::timeout(
            grace,
            run_to_end(&self.core.background, async move {
                delete.await;
                Ok(())
            }),
        )
        .await;
    }
}

impl Drop for WaitEdge {
    /// A wait dropped (cancelled, its task aborted): its edge must be gone
    /// before the party's next command reaches Redis, or a party that
    /// waits for one of its locks then could be refused for a cycle
    /// through a wait that is over. The `DEL` is polled once here, with a
    /// waker that does nothing: that first poll puts it on the client's
    /// connection (redis-rs queues a command on its first poll, in order
    /// with every later one), so whatever this party sends next reaches
    /// Redis after it. The rest (its reply) goes on in the background.
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let mut delete = Box::pin(delete(&self.core, key));
        // Outside a runtime (a runtime shutting down) the connection's
        // timers cannot be made: the background alone deletes it.
        if tokio::runtime::Handle::try_current().is_ok() {
            let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
            if delete.as_mut().poll(&mut cx).is_ready() {
                return;
            }
        }
        spawn_undo(&self.core.background, delete);
    }
}

/// `DEL key`, bounded by the response timeout; errors ignored (the edge
/// expires). Its first poll sends the command (see [`WaitEdge`]'s `Drop`).
fn delete(core: &Core, key: Box<str>) -> impl Future<Output = ()> + Send + 'static {
    let mut conn = core.conn.clone();
    let limit = core.current_settings().response_timeout;
    async move {
        let mut del = redis::cmd("DEL");
        del.arg(&*key);
        if let Ok(Err(error)) = tokio::time::timeout(limit, del.query_async::<i64>(&mut conn)).await
        {
            tracing::debug!(%error, key = &*key, "redlatch: a wait-for edge not deleted; it expires");
        }
    }
}

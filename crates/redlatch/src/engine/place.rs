//! What a waiter leaves in Redis while it waits (a place in a fair lock's
//! line, a waiting writer's claim), as one value: withdrawn when dropped
//! while armed (a cancelled acquire), from a task of its own, so no
//! primitive writes its own drop-and-spawn.

use std::sync::Arc;

use crate::engine::cancel::{run_to_end, spawn_undo};
use crate::engine::context::Core;
use crate::engine::primitive::AttemptCall;

/// The entry `call`'s attempts keep in Redis while its acquire waits.
pub(crate) struct Place<C: AttemptCall> {
    core: Arc<Core>,
    call: C,
    armed: bool,
}

impl<C: AttemptCall> Place<C> {
    /// The entry the attempts of `call` hold now.
    pub(crate) fn new(core: Arc<Core>, call: C) -> Place<C> {
        Place {
            core,
            call,
            armed: true,
        }
    }

    /// The entry is gone already (the acquire took the lock in the same
    /// script, or an undo withdraws it).
    pub(crate) fn forget(mut self) {
        self.armed = false;
    }

    /// Withdraws the entry now (a timed-out wait), from a task of its own so
    /// that dropping this future does not stop it. Errors are ignored: an
    /// entry that could not be withdrawn lapses by itself.
    pub(crate) async fn withdraw(mut self) {
        self.armed = false;
        let (conn, limit) = (
            self.core.conn.clone(),
            self.core.current_settings().response_timeout,
        );
        let call = self.call.clone();
        // Boxed: a waiter's future keeps the room of every future it may
        // await, and this one (a script call) is large and rarely awaited
        // (1.4 KB in every parked waiter, unboxed).
        let _ = Box::pin(run_to_end(&self.core.background, async move {
            call.withdraw(conn, limit).await;
            Ok(())
        }))
        .await;
    }
}

impl<C: AttemptCall> Drop for Place<C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (conn, limit) = (
            self.core.conn.clone(),
            self.core.current_settings().response_timeout,
        );
        let call = self.call.clone();
        spawn_undo(&self.core.background, async move {
            call.withdraw(conn, limit).await;
        });
    }
}

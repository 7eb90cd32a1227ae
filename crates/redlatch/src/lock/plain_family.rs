//! The reentrant lock's plug-in state, one per client: its coalesced
//! calls and the hand-off courtesy, and its [`LockFamily`].

use std::sync::Arc;

use crate::base::family::{Boxed, LOCK_RENEWAL, LockFamily, reenter_hash_field};
use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::hold_kind::HoldKind;
use crate::error::Result;
use crate::lock::coalesce::LockCalls;
use crate::lock::courtesy::Courtesy;
use crate::scripts::released::Released;

/// The reentrant lock's plug-in state, one per client (its `Client` makes
/// it at connect, and every lock handle and guard of the client shares it):
/// its guards are released with the other releases of the client under way
/// (coalesced, where the client coalesces), and a release to waiters
/// elsewhere steps this client aside (the hand-off courtesy).
pub(crate) struct PlainFamily {
    /// The lock's acquires and releases, coalesced (not on a cluster, nor
    /// when replicas must confirm each acquire).
    pub(crate) calls: Option<LockCalls>,
    /// The locks this client just released to waiters elsewhere.
    pub(crate) courtesy: Arc<Courtesy>,
}

impl std::fmt::Debug for PlainFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainFamily")
            .field("coalesced", &self.calls.is_some())
            .finish_non_exhaustive()
    }
}

impl PlainFamily {
    /// The state of the locks of the client `core`; on its runtime.
    pub(crate) fn for_client(core: &Core) -> Arc<PlainFamily> {
        let runtime = tokio::runtime::Handle::current();
        Arc::new(PlainFamily {
            calls: LockCalls::for_connection(
                &core.conn,
                &core.settings,
                core.replica_wait,
                &runtime,
            ),
            courtesy: Arc::default(),
        })
    }
}

impl LockFamily for PlainFamily {
    fn renewal(&self) -> HoldKind {
        HoldKind::Batched(&LOCK_RENEWAL)
    }

    fn release(&self, core: Arc<Core>, mut request: Request) -> Boxed<Result<Released>> {
        let coalesced = self.calls.as_ref().map(|calls| calls.release.clone());
        let courtesy = self.courtesy.clone();
        Box::pin(async move {
            let settings = core.current_settings();
            let limit = settings.response_timeout;
            // Waiters that marked the hold are woken by its release; those
            // that do not mark need the message all the same: Redisson's,
            // and this client's own queued behind one of its waiters (the
            // client listens on the lock while it has waiters, and a
            // linger after).
            request.wake_always = settings.redisson_waiters
                || core.wakeups.is_listening_to(request.keys.channel_name());
            let released = match &coalesced {
                // With the other releases of this client under way now, in one call.
                Some(calls) => calls.call(request.clone()).await,
                None => crate::lock::calls::release(&mut core.conn.clone(), &request, limit).await,
            };
            // Courtesy is the reentrant lock's: the fair lock names its next
            // holder, and a read-write lock may have many.
            if let Ok(Released::Unlocked { receivers }) = &released
                && *receivers > 0
            {
                // Our own subscription connection counts among the receivers
                // when this client listens on the lock (waiters, or a lingering subscription).
                let local = i64::from(core.wakeups.is_listening(&request.keys.channel()));
                if *receivers > local {
                    let grace = settings.handoff_grace;
                    courtesy.note_release(&request.keys.key, grace);
                }
            }
            released
        })
    }

    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
        reenter_hash_field(core, request)
    }
}

//! The reentrant lock's plug-in: how the watchdog renews its holds, and
//! what its guards' release and re-entry send. The fair lock and a
//! read-write lock's writer keep their holds in the same hash field, so
//! they renew and re-enter the same way.

use std::any::Any;
use std::sync::{Arc, LazyLock};

use crate::engine::context::Core;
use crate::engine::hold_kind::{BatchRenewal, HoldKind};
use crate::engine::primitive::{Boxed, LockFamily, on_connection};
use crate::error::Result;
use crate::scripts;
use crate::scripts::lock::{Released, Request};

/// Renews lock hash fields (`renew.lua`): the lock key, the owner field,
/// the lease, per hold.
pub(crate) static LOCK_RENEWAL: BatchRenewal = BatchRenewal {
    name: "lock",
    script: &scripts::RENEW,
    add_hold: |invocation, key, owner, lease_ms| {
        invocation.key(key).arg(owner).arg(lease_ms);
    },
    is_lock: true,
    native: None,
    string_value: false,
    keeps_lease: false,
};

/// The reentrant lock's guards: released with the other releases of the
/// client under way (coalesced, where the client coalesces), and a release
/// to waiters elsewhere steps this client aside (the hand-off courtesy).
#[derive(Debug)]
pub(crate) struct PlainFamily;

/// The one family value every reentrant lock guard shares.
pub(crate) static PLAIN: LazyLock<Arc<dyn LockFamily>> = LazyLock::new(|| Arc::new(PlainFamily));

impl LockFamily for PlainFamily {
    fn renewal(&self) -> HoldKind {
        HoldKind::Batched(&LOCK_RENEWAL)
    }

    fn release(&self, core: Arc<Core>, mut request: Request) -> Boxed<Result<Released>> {
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
            let released = match &core.lock_calls {
                // With the other releases of this client under way now, in one call.
                Some(calls) => calls.release.call(request.clone()).await,
                None => scripts::lock::release(&mut core.conn.clone(), &request, limit).await,
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
                    core.courtesy.note_release(&request.keys.key, grace);
                }
            }
            released
        })
    }

    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
        reenter_hash_field(core, request)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Re-enters a hold kept in one lock hash field (`reenter.lua`): the
/// reentrant lock's, the fair lock's, a read-write lock's writer's.
pub(crate) fn reenter_hash_field(core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
    on_connection(core, move |mut conn, limit| async move {
        scripts::lock::reenter(&mut conn, &request, limit).await
    })
}

//! A lock kind's plug-in (`LockFamily`): how the watchdog renews its
//! holds, and what its guards' release and re-entry send. The reentrant
//! lock, the fair lock and a read-write lock's writer keep their holds in
//! one lock hash field, so they renew and re-enter the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::hold_kind::{BatchRenewal, HoldKind};
use crate::error::Result;
use crate::scripts::released::Released;
use crate::transport::Connection;

/// A boxed future that owns what it needs.
pub(crate) type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs `send` with the client's connection and response timeout, boxed:
/// the body of a family's release or re-entry.
pub(crate) fn on_connection<T, F, Fut>(core: Arc<Core>, send: F) -> Boxed<Result<T>>
where
    T: Send + 'static,
    F: FnOnce(Connection, Duration) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    Box::pin(async move {
        let limit = core.current_settings().response_timeout;
        send(core.conn.clone(), limit).await
    })
}

/// The scripts a lock's guards run on their hold: the lock kind's release
/// and re-entry. A guard keeps its family as a trait object, so the guard
/// type is one for every lock kind.
pub(crate) trait LockFamily: Send + Sync + std::fmt::Debug + 'static {
    /// How the watchdog renews a hold of this kind.
    fn renewal(&self) -> HoldKind;

    /// Drops one hold. One round trip, at most the response timeout.
    fn release(&self, core: Arc<Core>, request: Request) -> Boxed<Result<Released>>;

    /// Adds one hold for an owner that holds already. One round trip. False
    /// when the owner no longer holds it.
    fn reenter(&self, core: Arc<Core>, request: Request) -> Boxed<Result<bool>>;
}

/// Renews lock hash fields (`renew.lua`): the lock key, the owner field,
/// the lease, per hold.
pub(crate) static LOCK_RENEWAL: BatchRenewal = BatchRenewal {
    name: "lock",
    script: &crate::base::scripts::RENEW,
    add_hold: |invocation, key, owner, lease_ms| {
        invocation.key(key).arg(owner).arg(lease_ms);
    },
    is_lock: true,
    native: None,
    string_value: false,
    keeps_lease: false,
};

/// Re-enters a hold kept in one lock hash field (`reenter.lua`): the
/// reentrant lock's, the fair lock's, a read-write lock's writer's.
pub(crate) fn reenter_hash_field(core: Arc<Core>, request: Request) -> Boxed<Result<bool>> {
    on_connection(core, move |mut conn, limit| async move {
        crate::base::calls::reenter(&mut conn, &request, limit).await
    })
}

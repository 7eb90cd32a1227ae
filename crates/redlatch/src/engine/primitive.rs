//! What a primitive plugs into the engine: how the watchdog renews its
//! holds ([`HoldKind`]), what its guards' release and re-entry send
//! ([`LockFamily`]), and what one acquire attempt sends and how it is undone
//! ([`AttemptCall`], run by [`crate::engine::attempt::attempt`]). The engine
//! names no primitive: each one defines these in its own files.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::context::Core;
use crate::engine::hold_kind::HoldKind;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::scripts::lock::{Released, Request};
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

/// One acquire attempt of a primitive: what it sends, and what undoing it
/// means. [`crate::engine::attempt::attempt`] runs it so that an abandoned
/// or uncertain attempt is always undone by one policy.
pub(crate) trait AttemptCall: Clone + Send + Sync + 'static {
    /// What the script answered.
    type Reply: Send + 'static;

    /// The lock's key, for logs.
    fn key(&self) -> &str;

    /// The owner was named by the caller (not unique to this attempt).
    fn named(&self) -> bool;

    /// The lease the attempt asks for: an undo keeps trying this long at most.
    fn lease_ms(&self) -> u64;

    /// Sends the attempt, stamped `sent_at`.
    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<Self::Reply>> + Send + 'static + use<Self>;

    /// The reply says a hold was taken.
    fn took_hold(reply: &Self::Reply) -> bool;

    /// Withdraws what waiting left in Redis (a place in line, a writer's
    /// claim). Errors are ignored: such entries lapse by themselves.
    fn withdraw(&self, _conn: Connection, _limit: Duration) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Drops one hold the attempt took.
    fn release(
        &self,
        conn: Connection,
        limit: Duration,
    ) -> impl Future<Output = Result<Released>> + Send;
}

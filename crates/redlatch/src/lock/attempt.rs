//! The reentrant lock's acquire attempt, as the engine runs it
//! ([`crate::engine::attempt::attempt`]): the acquire script, coalesced
//! with the client's other acquires under way, or followed by `WAIT` when
//! replicas must confirm it. Withdrawing it withdraws a long waiter's
//! claim to the lock's next turn.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::primitive::AttemptCall;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::lock::calls::{self as lock, LockReply};
use crate::lock::coalesce::Coalescer;
use crate::scripts::released::Released;
use crate::transport::Connection;

/// The client's acquires under way, sent together ([`PlainFamily`]'s).
///
/// [`PlainFamily`]: crate::lock::plain_family::PlainFamily
pub(crate) type AcquireCalls = Arc<Coalescer<Request, LockReply>>;

/// One acquire of the reentrant lock, and the client's coalesced acquires
/// it leaves with (`None`: alone).
#[derive(Clone)]
pub(crate) struct LockAttempt(pub(crate) Request, pub(crate) Option<AcquireCalls>);

impl AttemptCall for LockAttempt {
    type Reply = LockReply;

    fn key(&self) -> &str {
        &self.0.keys.key
    }

    fn named(&self) -> bool {
        self.0.named_owner
    }

    fn lease_ms(&self) -> u64 {
        self.0.lease_ms
    }

    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<LockReply>> + Send + 'static + use<> {
        send_acquire(core, self.0.clone(), sent_at, self.1.clone())
    }

    fn took_hold(reply: &LockReply) -> bool {
        matches!(reply, LockReply::Acquired(_))
    }

    /// Withdraws this owner's claim to the lock's next turn, if it stands.
    async fn withdraw(&self, mut conn: Connection, limit: Duration) {
        let _ = lock::withdraw_precedence(&mut conn, &self.0, limit).await;
    }

    /// Gives back a hold nobody received: the message goes out whether or
    /// not a waiter marked it (this client's queued waiters never did).
    async fn release(&self, mut conn: Connection, limit: Duration) -> Result<Released> {
        let request = Request {
            wake_always: true,
            ..self.0.clone()
        };
        lock::release(&mut conn, &request, limit).await
    }
}

/// One acquire of the reentrant lock that leaves at once on its own, never
/// queued behind a call of its client already on its way: a Redlock node's.
/// Each node client carries one acquisition's call at a time; coalesced, the
/// next acquisition's call to a node still answering the last one (a node
/// after the first majority) would wait for that answer before leaving,
/// where alone it is pipelined behind it on the connection.
#[derive(Clone)]
pub(crate) struct LockAttemptAlone(pub(crate) LockAttempt);

impl AttemptCall for LockAttemptAlone {
    type Reply = LockReply;

    fn key(&self) -> &str {
        self.0.key()
    }

    fn named(&self) -> bool {
        self.0.named()
    }

    fn lease_ms(&self) -> u64 {
        self.0.lease_ms()
    }

    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<LockReply>> + Send + 'static + use<> {
        send_acquire(core, self.0.0.clone(), sent_at, None)
    }

    fn took_hold(reply: &LockReply) -> bool {
        LockAttempt::took_hold(reply)
    }

    async fn withdraw(&self, conn: Connection, limit: Duration) {
        self.0.withdraw(conn, limit).await;
    }

    async fn release(&self, conn: Connection, limit: Duration) -> Result<Released> {
        self.0.release(conn, limit).await
    }
}

/// Sends one acquire: followed by `WAIT` when replicas must confirm it,
/// else in one call with the other acquires of this client under way now
/// (`coalesced`), or alone.
fn send_acquire(
    core: &Core,
    request: Request,
    sent_at: LeaseInstant,
    coalesced: Option<AcquireCalls>,
) -> impl Future<Output = Result<LockReply>> + Send + 'static + use<> {
    let mut conn = core.conn.clone();
    let limit = core.current_settings().response_timeout;
    let replica_wait = core.replica_wait;
    async move {
        match (replica_wait, coalesced) {
            (Some(wait), _) => {
                lock::acquire_replicated(&mut conn, &request, sent_at, limit, wait).await
            }
            (None, Some(calls)) => calls.call(request).await,
            (None, None) => lock::acquire(&mut conn, &request, sent_at, limit).await,
        }
    }
}

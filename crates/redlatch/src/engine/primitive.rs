//! What a primitive plugs into the engine: how the watchdog renews its
//! holds ([`BatchRenewal`]), what its guards' release and re-entry send
//! ([`LockFamily`]), and what one acquire attempt sends and how it is undone
//! ([`AttemptCall`], run by [`crate::engine::attempt::attempt`]). The engine
//! names no primitive: each one defines these in its own files.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use crate::engine::Core;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::scripts::lock::{Released, Request};
use crate::scripts::{Invocation, Lua};
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

/// How the watchdog renews holds of one kind: many holds per call of one
/// script. Every renewal script takes KEYS\[i\] and its own arguments per
/// hold, and answers 1 (renewed) or 0 (gone) per hold, in order.
pub(crate) struct BatchRenewal {
    /// Names the kind in logs and spans.
    pub(crate) name: &'static str,
    pub(crate) script: &'static LazyLock<Lua>,
    /// Adds one hold (its key, its owner field or member, the lease) to a call.
    pub(crate) add_hold: fn(&mut Invocation, key: &str, owner: &str, lease_ms: u64),
    /// A hold on a lock, not a permit: counted by `Client::held_locks`,
    /// marked lost by a force-unlock, counted by the lost-locks metric.
    pub(crate) is_lock: bool,
}

impl std::fmt::Debug for BatchRenewal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// How the watchdog renews a hold: with a batched script of the hold's
/// primitive, or by calling the hold back.
#[derive(Clone)]
pub(crate) enum HoldKind {
    /// Many holds per call of one script (a lock hash field, a read hold, a
    /// permit): the primitive says which.
    Batched(&'static BatchRenewal),
    /// A hold that renews itself when asked (a Redlock hold, on a majority
    /// of nodes); it keeps its own lease rather than the default one.
    Callback(Weak<dyn RenewNow>),
}

impl std::fmt::Debug for HoldKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldKind::Batched(renewal) => renewal.fmt(f),
            HoldKind::Callback(_) => f.write_str("callback"),
        }
    }
}

impl HoldKind {
    /// True for holds on a single server's lock (what `Client::held_locks`
    /// counts and a force-unlock marks lost).
    pub(crate) fn is_lock(&self) -> bool {
        matches!(self, HoldKind::Batched(renewal) if renewal.is_lock)
    }

    /// True when renewals set the client's live default lease.
    pub(crate) fn follows_default_lease(&self) -> bool {
        !matches!(self, HoldKind::Callback(_))
    }

    /// True for a hold on a lock of any kind, Redlock's included (not a
    /// permit): what the lost-locks metric counts.
    pub(crate) fn counts_as_lock(&self) -> bool {
        !matches!(self, HoldKind::Batched(renewal) if !renewal.is_lock)
    }

    /// The same renewal: holds of one kind share one script call.
    pub(crate) fn same_batch(&self, other: &HoldKind) -> bool {
        match (self, other) {
            (HoldKind::Batched(a), HoldKind::Batched(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

/// What a renewal by callback found.
#[derive(Debug)]
pub(crate) enum Renewed {
    /// Renewed with the lease asked for, within the validity (the callback
    /// has confirmed the hold).
    Yes,
    /// Gone: no renewal can succeed any more.
    Gone,
    /// Did not count this time (timeouts, too few answers); retried.
    Failed(String),
}

/// A hold the watchdog cannot renew with a batched script: it renews itself.
pub(crate) trait RenewNow: Send + Sync {
    /// Renews the hold once, now, with a lease of `lease_ms`.
    fn renew_now(self: Arc<Self>, lease_ms: u64) -> Pin<Box<dyn Future<Output = Renewed> + Send>>;
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

    /// The family itself, for the one primitive that needs its own back
    /// (a write guard's downgrade reads its keys).
    fn as_any(&self) -> &dyn Any;
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

/// A renewal for the engine's own tests: the lock hash field's script.
#[cfg(test)]
pub(crate) static TEST_RENEWAL: BatchRenewal = BatchRenewal {
    name: "test",
    script: &crate::scripts::RENEW,
    add_hold: |invocation, key, owner, lease_ms| {
        invocation.key(key).arg(owner).arg(lease_ms);
    },
    is_lock: true,
};

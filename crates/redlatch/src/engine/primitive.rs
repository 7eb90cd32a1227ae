//! What a primitive plugs into the engine besides how the watchdog renews
//! its holds (`engine/hold_kind.rs`): what one acquire attempt sends and
//! how it is undone ([`AttemptCall`], run by
//! [`crate::engine::attempt::attempt`]). The engine names no primitive:
//! each one defines these in its own files.

use std::future::Future;
use std::time::Duration;

use crate::engine::context::Core;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::scripts::released::Released;
use crate::transport::Connection;

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

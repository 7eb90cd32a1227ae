//! The fair lock's acquire attempt, as the engine runs it
//! ([`crate::engine::attempt::attempt`]): take the lock, or keep this
//! owner's place in line; withdrawing it leaves the line.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::primitive::AttemptCall;
use crate::error::Result;
use crate::fair_lock::calls::{self as fair, FairReply, PlaceTimes};
use crate::fair_lock::keys::FairKeys;
use crate::lease_clock::LeaseInstant;
use crate::scripts::released::Released;
use crate::transport::Connection;

/// One call of the fair acquire script.
#[derive(Clone)]
pub(crate) struct FairCall {
    pub(crate) keys: Arc<FairKeys>,
    pub(crate) owner: Arc<str>,
    pub(crate) named: bool,
    pub(crate) times: PlaceTimes,
}

impl AttemptCall for FairCall {
    type Reply = FairReply;

    fn key(&self) -> &str {
        &self.keys.lock.key
    }

    fn named(&self) -> bool {
        self.named
    }

    fn lease_ms(&self) -> u64 {
        self.times.lease_ms
    }

    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<FairReply>> + Send + 'static + use<> {
        let mut conn = core.conn.clone();
        let limit = core.current_settings().response_timeout;
        let (keys, owner, times) = (self.keys.clone(), self.owner.clone(), self.times);
        async move { fair::acquire(&mut conn, &keys, &owner, times, sent_at, limit).await }
    }

    fn took_hold(reply: &FairReply) -> bool {
        matches!(reply, FairReply::Acquired(_))
    }

    /// Leaves the line; those behind move up by the wait time this owner
    /// joined with. A hold a release handed to this owner, which no guard
    /// took, is given back (and passed on) too.
    async fn withdraw(&self, mut conn: Connection, limit: Duration) {
        let _ = fair::leave(&mut conn, &self.keys, &self.owner, self.times, limit).await;
    }

    async fn release(&self, mut conn: Connection, limit: Duration) -> Result<Released> {
        let request = Request {
            keys: self.keys.lock.clone(),
            owner: self.owner.clone(),
            named_owner: self.named,
            lease_ms: self.times.lease_ms,
            waited_ms: 0,
            wake_always: false,
        };
        fair::release(&mut conn, &self.keys, &request, limit).await
    }
}

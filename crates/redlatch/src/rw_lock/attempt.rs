//! The read-write lock's acquire attempt, as the engine runs it
//! ([`crate::engine::attempt::attempt`]): read or write; a waiting writer
//! keeps a claim that holds new readers back, and withdrawing the attempt
//! withdraws the claim.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::base::request::Request;
use crate::engine::context::Core;
use crate::engine::primitive::AttemptCall;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::rw_lock::calls::{self as rw, RwReply, Side};
use crate::rw_lock::keys::{RwKeys, write_field};
use crate::scripts::released::Released;
use crate::transport::Connection;

/// One call of the read or write acquire script.
#[derive(Clone)]
pub(crate) struct RwCall {
    pub(crate) keys: Arc<RwKeys>,
    pub(crate) side: Side,
    /// The owner's read field, `<client-id>:<owner>`; the write field adds `:write`.
    pub(crate) reader: Arc<str>,
    pub(crate) named: bool,
    pub(crate) lease_ms: u64,
    /// The writer's claim lease; 0 claims nothing.
    pub(crate) claim_ms: u64,
}

impl RwCall {
    /// The owner field of the hold this call asks for.
    pub(crate) fn field(&self) -> Arc<str> {
        match self.side {
            Side::Read => self.reader.clone(),
            Side::Write => Arc::from(write_field(&self.reader)),
        }
    }

    /// The lock keys and owner field a hold of this call is released with.
    pub(crate) fn request(&self) -> Request {
        Request {
            keys: self.keys.as_lock_keys(),
            owner: self.field(),
            named_owner: self.named,
            lease_ms: self.lease_ms,
            waited_ms: 0,
            wake_always: false,
        }
    }
}

impl AttemptCall for RwCall {
    type Reply = RwReply;

    fn key(&self) -> &str {
        &self.keys.key
    }

    fn named(&self) -> bool {
        self.named
    }

    fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<RwReply>> + Send + 'static + use<> {
        let mut conn = core.conn.clone();
        let limit = core.current_settings().response_timeout;
        let call = self.clone();
        async move {
            let acquire = rw::Acquire {
                keys: &call.keys,
                side: call.side,
                reader: &call.reader,
                lease_ms: call.lease_ms,
                claim_ms: call.claim_ms,
            };
            acquire.run(&mut conn, sent_at, false, limit).await
        }
    }

    fn took_hold(reply: &RwReply) -> bool {
        matches!(reply, RwReply::Acquired(_))
    }

    /// Withdraws a waiting writer's claim.
    async fn withdraw(&self, mut conn: Connection, limit: Duration) {
        if self.side == Side::Write && self.claim_ms > 0 {
            let _ = rw::writer_leave(&mut conn, &self.keys, &self.field(), limit).await;
        }
    }

    async fn release(&self, mut conn: Connection, limit: Duration) -> Result<Released> {
        let request = self.request();
        match self.side {
            Side::Read => rw::read_release(&mut conn, &self.keys, &request, limit).await,
            Side::Write => rw::write_release(&mut conn, &self.keys, &request, limit).await,
        }
    }
}

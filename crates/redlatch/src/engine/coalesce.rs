//! Concurrent calls of one kind, sent as one script call (group commit):
//! while a batch is on its way, calls that arrive queue up and leave
//! together in the next one. A lone call goes at once; under load, Redis
//! pays a script call's fixed cost (parsing, the Lua call, the reply) once
//! per batch instead of once per lock.
//!
//! Used for the reentrant lock's acquires and releases on one server or
//! through Sentinel (on a cluster one call may only touch one slot, and
//! replica waits pipeline each acquire with its own `WAIT`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::scripts::lock::{self, Attempt, Released, Request};
use crate::settings::SharedSettings;
use crate::transport::Connection;
use crate::transport::topology::ReplicaWait;

/// Sends one batch: one outcome per request, in order, or one error for all.
pub(crate) type SendBatch<Req, Rep> = Box<
    dyn Fn(Vec<Req>) -> Pin<Box<dyn Future<Output = Result<Vec<Result<Rep>>>> + Send>>
        + Send
        + Sync,
>;

/// Calls of one kind waiting to leave, and whether a batch is on its way.
pub(crate) struct Coalescer<Req, Rep> {
    op: &'static str,
    max_batch: usize,
    send: SendBatch<Req, Rep>,
    pending: Mutex<Pending<Req, Rep>>,
}

struct Pending<Req, Rep> {
    queue: Vec<(Req, oneshot::Sender<Result<Rep>>)>,
    sending: bool,
}

impl<Req: Send + 'static, Rep: Send + 'static> Coalescer<Req, Rep> {
    /// At most `max_batch` calls leave together.
    pub(crate) fn new(op: &'static str, max_batch: usize, send: SendBatch<Req, Rep>) -> Self {
        Coalescer {
            op,
            max_batch: max_batch.max(1),
            send,
            pending: Mutex::new(Pending {
                queue: Vec::new(),
                sending: false,
            }),
        }
    }

    /// Queues `request` and waits for its outcome. The first caller to
    /// find nothing on its way sends the batch itself (a lone call pays no
    /// task switch); what queued meanwhile leaves from a task of its own.
    /// Callers run in tasks of their own (the hand-overs of acquire and
    /// release): a leader dropped halfway hands the queue to a task, and
    /// the calls of its batch fail with [`Error::RuntimeGone`].
    pub(crate) async fn call(self: &Arc<Self>, request: Req) -> Result<Rep> {
        let (reply, outcome) = oneshot::channel();
        let lead = {
            let mut pending = self.pending.lock();
            pending.queue.push((request, reply));
            !std::mem::replace(&mut pending.sending, true)
        };
        if lead {
            let _leading = Leading {
                coalescer: self.clone(),
            };
            self.send_batch().await;
        }
        outcome
            .await
            .map_err(|_| Error::RuntimeGone { op: self.op })?
    }

    /// Sends one batch of what is queued; false when nothing was.
    async fn send_batch(&self) -> bool {
        let batch: Vec<_> = {
            let mut pending = self.pending.lock();
            if pending.queue.is_empty() {
                pending.sending = false;
                return false;
            }
            let take = pending.queue.len().min(self.max_batch);
            pending.queue.drain(..take).collect()
        };
        let (requests, replies): (Vec<Req>, Vec<_>) = batch.into_iter().unzip();
        match (self.send)(requests).await {
            Ok(outcomes) => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            Err(error) => {
                for reply in replies {
                    let _ = reply.send(Err(error.for_another_caller()));
                }
            }
        }
        true
    }

    /// Sends batches until nothing is queued.
    async fn drain(self: Arc<Self>) {
        while self.send_batch().await {}
    }
}

/// The caller sending a batch: when it is done, or dropped halfway, what
/// queued meanwhile goes on from a task of its own.
struct Leading<Req: Send + 'static, Rep: Send + 'static> {
    coalescer: Arc<Coalescer<Req, Rep>>,
}

impl<Req: Send + 'static, Rep: Send + 'static> Drop for Leading<Req, Rep> {
    fn drop(&mut self) {
        let more = {
            let mut pending = self.coalescer.pending.lock();
            if pending.queue.is_empty() {
                pending.sending = false;
                false
            } else {
                true
            }
        };
        if more {
            drop(tokio::spawn(self.coalescer.clone().drain()));
        }
    }
}

/// Most calls in one batch: enough to amortize a script call, few enough
/// that one batch does not hold the server for long.
const MAX_BATCH: usize = 128;

/// The reentrant lock's coalesced acquires and releases on one connection.
pub(crate) struct LockCalls {
    pub(crate) acquire: Arc<Coalescer<Request, Attempt>>,
    pub(crate) release: Arc<Coalescer<Request, Released>>,
}

impl LockCalls {
    /// For `conn`, unless it is a cluster connection (one slot per call) or
    /// each acquire must wait for replicas.
    pub(crate) fn for_connection(
        conn: &Connection,
        settings: &SharedSettings,
        replica_wait: Option<ReplicaWait>,
    ) -> Option<LockCalls> {
        if conn.is_cluster() || replica_wait.is_some() {
            return None;
        }
        let acquire = {
            let (conn, settings) = (conn.clone(), settings.clone());
            Coalescer::new(
                "acquire",
                MAX_BATCH,
                Box::new(move |requests: Vec<Request>| {
                    let (mut conn, limit) = (conn.clone(), settings.read().response_timeout);
                    Box::pin(async move { lock::acquire_many(&mut conn, &requests, limit).await })
                }),
            )
        };
        let release = {
            let (conn, settings) = (conn.clone(), settings.clone());
            Coalescer::new(
                "release",
                MAX_BATCH,
                Box::new(move |requests: Vec<Request>| {
                    let (mut conn, limit) = (conn.clone(), settings.read().response_timeout);
                    Box::pin(async move { lock::release_many(&mut conn, &requests, limit).await })
                }),
            )
        };
        Some(LockCalls {
            acquire: Arc::new(acquire),
            release: Arc::new(release),
        })
    }
}

//! Concurrent calls of one kind, sent as one script call (group commit):
//! while a batch is on its way, calls that arrive queue up and leave
//! together in the next one. A lone call goes at once; under load, Redis
//! pays a script call's fixed cost (parsing, the Lua call, the reply) once
//! per batch instead of once per lock.
//!
//! A lone call (no sender running, no other lone call on its way) is sent
//! from its caller's own future: no task switch. Every other call queues,
//! and batches leave from a task of the client's runtime, never from a
//! caller's future: the first queued call that finds no sender running
//! starts one (one spawn per burst), which sends batches until the queue is
//! empty. One call or batch is on its way at a time, so that calls arriving
//! meanwhile leave together: the sender first finishes a lone call on its
//! way, polling it itself (the lone call is a shared future), so it never
//! waits for the lone caller to poll. Queued callers only await their own
//! reply. So no caller's poll, or its absence (a future kept but not
//! polled), decides when another caller's request leaves or is answered.
//!
//! Used for the reentrant lock's acquires and releases on one server or
//! through Sentinel (on a cluster one call may only touch one slot, and
//! replica waits pipeline each acquire with its own `WAIT`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use futures_util::future::Shared;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::base::request::Request;
use crate::error::{Error, Result};
use crate::lock::calls::{self as lock, LockReply};
use crate::scripts::released::Released;
use crate::settings::SharedSettings;
use crate::sync::{Mutex, Spawner};
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
    spawner: Spawner,
    pending: Mutex<Pending<Req, Rep>>,
}

struct Pending<Req, Rep> {
    queue: Vec<(Req, oneshot::Sender<Result<Rep>>)>,
    /// A sender task is running.
    sending: bool,
    /// The lone call on its way, and its number: its caller polls it, and
    /// so does a sender that starts meanwhile.
    lone: Option<(u64, LoneCall)>,
    lone_calls: u64,
}

/// A lone call on its way, which its caller and a sender may both poll; its
/// outcome goes to a slot its caller takes it from.
type LoneCall = Shared<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// Where a lone call's outcome waits for its caller.
type LoneOutcome<Rep> = Arc<Mutex<Option<Result<Vec<Result<Rep>>>>>>;

impl<Req: Send + 'static, Rep: Send + 'static> Coalescer<Req, Rep> {
    /// At most `max_batch` calls leave together.
    pub(crate) fn new(
        op: &'static str,
        max_batch: usize,
        spawner: Spawner,
        send: SendBatch<Req, Rep>,
    ) -> Self {
        Coalescer {
            op,
            max_batch: max_batch.max(1),
            send,
            spawner,
            pending: Mutex::new(Pending {
                queue: Vec::new(),
                sending: false,
                lone: None,
                lone_calls: 0,
            }),
        }
    }

    /// Sends `request` and waits for its outcome: at once from this future
    /// when nothing else is on its way (a lone call), else queued for the
    /// sender task, which the first queued call to find none running starts
    /// on the client's runtime. Nobody waits for this future: dropping it,
    /// or keeping it unpolled, holds up no other call. If the runtime is
    /// gone a queued call fails with [`Error::RuntimeGone`].
    pub(crate) async fn call(self: &Arc<Self>, request: Req) -> Result<Rep> {
        let (request, lone) = {
            let mut pending = self.pending.lock();
            if pending.sending || pending.lone.is_some() {
                (Some(request), None)
            } else {
                let number = pending.lone_calls;
                pending.lone_calls += 1;
                let (call, outcome) = self.lone_call(number, request);
                pending.lone = Some((number, call.clone()));
                (None, Some((call, outcome)))
            }
        };
        if let Some((call, outcome)) = lone {
            call.await;
            let outcomes = outcome.lock().take();
            return match outcomes {
                Some(outcomes) => outcomes?.pop().unwrap_or(Err(Error::Protocol {
                    op: self.op,
                    detail: "no outcome for a lone call".to_owned(),
                })),
                None => Err(Error::RuntimeGone { op: self.op }),
            };
        }
        let request = request.expect("queued calls keep their request");
        let (reply, outcome) = oneshot::channel();
        let start_sender = {
            let mut pending = self.pending.lock();
            pending.queue.push((request, reply));
            !std::mem::replace(&mut pending.sending, true)
        };
        if start_sender {
            self.spawner.spawn(self.clone().drain());
        }
        outcome
            .await
            .map_err(|_| Error::RuntimeGone { op: self.op })?
    }

    /// Lone call `number` of `request`: a shared future that sends it, puts
    /// its outcome in the slot returned, and then lets the next call go
    /// alone again.
    fn lone_call(self: &Arc<Self>, number: u64, request: Req) -> (LoneCall, LoneOutcome<Rep>) {
        let outcome: LoneOutcome<Rep> = Arc::new(Mutex::new(None));
        let sent = (self.send)(vec![request]);
        let (slot, coalescer): (_, Weak<Self>) = (outcome.clone(), Arc::downgrade(self));
        let call: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let answered = sent.await;
            *slot.lock() = Some(answered);
            if let Some(coalescer) = coalescer.upgrade() {
                let mut pending = coalescer.pending.lock();
                if pending
                    .lone
                    .as_ref()
                    .is_some_and(|(lone, _)| *lone == number)
                {
                    pending.lone = None;
                }
            }
        });
        (call.shared(), outcome)
    }

    /// Sends one batch of what is queued; false when nothing was (then the
    /// sender is done: the next call starts another).
    async fn send_batch(&self) -> bool {
        // One call or batch on its way at a time: finish a lone call first,
        // polling it here should its caller not.
        let lone = self
            .pending
            .lock()
            .lone
            .as_ref()
            .map(|(_, call)| call.clone());
        if let Some(lone) = lone {
            lone.await;
        }
        // Let the callers about to call (the lone caller's task, woken by
        // the same reply) queue first: a batch taken at once is often one
        // call short.
        tokio::task::yield_now().await;
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

    /// The sender: sends batches until nothing is queued.
    async fn drain(self: Arc<Self>) {
        let mut sender = Sender {
            coalescer: &self,
            done: false,
        };
        while self.send_batch().await {}
        sender.done = true;
    }
}

/// The running sender. Dropped before it is done (its runtime shut down),
/// it fails the calls still queued and lets a later call start a sender.
struct Sender<'a, Req, Rep> {
    coalescer: &'a Coalescer<Req, Rep>,
    done: bool,
}

impl<Req, Rep> Drop for Sender<'_, Req, Rep> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let stranded = {
            let mut pending = self.coalescer.pending.lock();
            pending.sending = false;
            std::mem::take(&mut pending.queue)
        };
        // Their callers get `RuntimeGone` as the replies drop.
        drop(stranded);
    }
}

/// Most calls in one batch: enough to amortize a script call, few enough
/// that one batch does not hold the server for long.
const MAX_BATCH: usize = 128;

/// The reentrant lock's coalesced acquires and releases on one connection.
pub(crate) struct LockCalls {
    pub(crate) acquire: Arc<Coalescer<Request, LockReply>>,
    pub(crate) release: Arc<Coalescer<Request, Released>>,
}

impl LockCalls {
    /// For `conn`, unless it is a cluster connection (one slot per call) or
    /// each acquire must wait for replicas.
    pub(crate) fn for_connection(
        conn: &Connection,
        settings: &SharedSettings,
        replica_wait: Option<ReplicaWait>,
        runtime: &Handle,
    ) -> Option<LockCalls> {
        if conn.is_cluster() || replica_wait.is_some() {
            return None;
        }
        let acquire = {
            let (conn, settings) = (conn.clone(), settings.clone());
            Coalescer::new(
                "acquire",
                MAX_BATCH,
                Spawner::new(runtime),
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
                Spawner::new(runtime),
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

// On a tokio runtime: not built for the permutation checks, whose spawner is shuttle's.
#[cfg(all(test, not(feature = "__permutation-checks")))]
mod tests {
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// The sizes of the batches sent.
    type Sizes = Arc<Mutex<Vec<usize>>>;

    /// A coalescer whose batches each wait for one permit of `wire`.
    fn gated(wire: Arc<Semaphore>) -> (Arc<Coalescer<u32, u32>>, Sizes) {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let log = sizes.clone();
        let send: SendBatch<u32, u32> = Box::new(move |requests: Vec<u32>| {
            let (wire, log) = (wire.clone(), log.clone());
            Box::pin(async move {
                wire.acquire().await.expect("open").forget();
                log.lock().push(requests.len());
                Ok(requests.into_iter().map(Ok).collect())
            })
        });
        let spawner = Spawner::new(&Handle::current());
        (Arc::new(Coalescer::new("test", 8, spawner, send)), sizes)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_arriving_while_a_batch_is_on_its_way_leave_together_in_the_next() {
        let wire = Arc::new(Semaphore::new(0));
        let (coalescer, sizes) = gated(wire.clone());
        let call = |request: u32| {
            let coalescer = coalescer.clone();
            tokio::spawn(async move { coalescer.call(request).await })
        };
        // A lone call leaves from its own future; the calls that come while
        // it is on its way queue, and leave together once it has answered.
        let lone = call(0);
        while coalescer.pending.lock().lone.is_none() {
            tokio::task::yield_now().await;
        }
        let others: Vec<_> = (1..=5).map(call).collect();
        while coalescer.pending.lock().queue.len() < 5 {
            tokio::task::yield_now().await;
        }
        wire.add_permits(2);
        assert_eq!(lone.await.unwrap().unwrap(), 0);
        for (request, other) in (1..=5).zip(others) {
            assert_eq!(other.await.unwrap().unwrap(), request);
        }
        assert_eq!(*sizes.lock(), vec![1, 5]);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let pending = coalescer.pending.lock();
        assert!(!pending.sending, "the sender stops when the queue is empty");
        assert!(pending.lone.is_none(), "a lone call that answered is over");
    }
}

/// Every interleaving of callers, some dropped mid-call, one kept unpolled,
/// with a fake server (docs/TESTING.md, "Permutation checks").
#[cfg(all(test, feature = "__permutation-checks"))]
mod permutation_checks {
    use std::pin::pin;

    use shuttle::future::{block_on, spawn, yield_now};

    use super::*;
    use crate::sync::permutations::{eventually, explore, poll_once};

    /// Fails a whole batch when it carries this request.
    const FAILS_ITS_BATCH: u32 = 3;

    /// What the fake server answered: each batch, and whether it failed whole.
    type Sent = Arc<Mutex<Vec<(Vec<u32>, bool)>>>;

    /// A coalescer whose batches take two scheduling points on the "wire";
    /// even requests succeed with ten times their value, odd ones are
    /// refused with their own number, and a batch with [`FAILS_ITS_BATCH`]
    /// fails whole.
    fn fake_server(max_batch: usize) -> (Arc<Coalescer<u32, u32>>, Sent) {
        let sent: Sent = Arc::default();
        let log = sent.clone();
        let send: SendBatch<u32, u32> = Box::new(move |requests: Vec<u32>| {
            let log = log.clone();
            Box::pin(async move {
                yield_now().await;
                let fails = requests.contains(&FAILS_ITS_BATCH);
                log.lock().push((requests.clone(), fails));
                yield_now().await;
                if fails {
                    return Err(Error::ResponseTimeout {
                        op: "fake batch",
                        limit: crate::error::TimeLimit::Response,
                    });
                }
                Ok(requests.iter().map(|&r| outcome_of(r)).collect())
            })
        });
        let coalescer = Coalescer::new("fake", max_batch, Spawner::for_checks(), send);
        (Arc::new(coalescer), sent)
    }

    fn outcome_of(request: u32) -> Result<u32> {
        if request.is_multiple_of(2) {
            Ok(request * 10)
        } else {
            Err(Error::NotHeld {
                name: request.to_string(),
            })
        }
    }

    /// `request`'s outcome is its own: its batch's error, or its own reply.
    fn assert_own_outcome(sent: &Sent, request: u32, outcome: &Result<u32>) {
        let sent = sent.lock();
        let batches: Vec<_> = sent.iter().filter(|(b, _)| b.contains(&request)).collect();
        assert_eq!(
            batches.len(),
            1,
            "request {request} sent {} times",
            batches.len()
        );
        match (batches[0].1, outcome) {
            (true, Err(Error::ResponseTimeout { .. })) => {}
            (false, Ok(value)) => assert_eq!(*value, request * 10, "request {request}"),
            (false, Err(Error::NotHeld { name })) => {
                assert_eq!(
                    name,
                    &request.to_string(),
                    "request {request} got another's refusal"
                );
            }
            (failed, other) => panic!("request {request} (batch failed: {failed}) got {other:?}"),
        }
    }

    /// Callers 0, 1, 2, 3 (3 fails its batch) await their outcomes; 4 is
    /// aborted at a point of the schedule's choosing; 5 is polled once and
    /// kept unpolled until every awaited call has answered. Then the
    /// coalescer still answers, its queue is empty and nothing is on its way.
    fn callers_dropped_or_kept_unpolled_delay_nobody() {
        block_on(async {
            let (coalescer, sent) = fake_server(2);
            let (release_kept, kept_released) = oneshot::channel::<()>();
            let kept = spawn({
                let coalescer = coalescer.clone();
                async move {
                    let mut call = pin!(coalescer.call(5));
                    poll_once(call.as_mut());
                    let _ = kept_released.await;
                }
            });
            let awaited: Vec<_> = (0..4)
                .map(|request| {
                    let coalescer = coalescer.clone();
                    spawn(async move { (request, coalescer.call(request).await) })
                })
                .collect();
            let aborted = spawn({
                let coalescer = coalescer.clone();
                async move { coalescer.call(4).await }
            });
            yield_now().await;
            aborted.abort();
            for caller in awaited {
                let (request, outcome) = caller.await.expect("an awaited caller ends");
                assert_own_outcome(&sent, request, &outcome);
            }
            drop(release_kept);
            kept.await.expect("the kept caller ends");

            let last = coalescer.call(6).await;
            assert_own_outcome(&sent, 6, &last);
            let coalescer = coalescer.clone();
            let idle = eventually(100, || {
                let pending = coalescer.pending.lock();
                pending.queue.is_empty() && !pending.sending && pending.lone.is_none()
            })
            .await;
            assert!(idle, "the queue drained but the coalescer still looks busy");
        });
    }

    #[test]
    fn permutation_coalesced_calls_each_get_their_own_outcome_whatever_other_callers_do() {
        explore(callers_dropped_or_kept_unpolled_delay_nobody);
    }
}

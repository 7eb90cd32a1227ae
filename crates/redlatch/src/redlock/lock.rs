//! The Redlock lock handle: one attempt over all nodes, and the wait between attempts.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use futures_util::FutureExt;
use tracing::Instrument;

use tokio_util::sync::CancellationToken;

use crate::base::handle_options::{lease_option, waiting_methods};
use crate::base::keys::LockKeys;
use crate::base::request::Request;
use crate::base::status::LockStatus;
use crate::engine::attempt;
use crate::engine::cancel::{hand_over, spawn_undo};
use crate::engine::hold::{Hold, NewHold};
use crate::engine::hold_kind::{HoldKind, RenewNow};
use crate::engine::wait::{Acquisition, Step, Wait, Wakes, wait_for};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, NodeFailure, Result};
use crate::lock::attempt::{LockAttempt, LockAttemptAlone};
use crate::lock::calls::LockReply;
use crate::redlock::guard::{RedlockGuard, RedlockHold};
use crate::redlock::handle::Redlock;
use crate::redlock::last_release::LastRelease;
use crate::redlock::quorum;
use crate::redlock::watchdog;
use crate::scripts::acquired::Acquired;
use crate::settings::{RetryPolicy, limits};

/// How long to wait before re-checking when a holder's lock has no expiry.
const NO_EXPIRY_RECHECK: Duration = Duration::from_secs(1);

/// A handle to one lock name on every node of a [`Redlock`].
///
/// Cheap to create and clone. Each acquisition gets a fresh owner,
/// `<redlock-id>:#<n>`, the same on every node, so two acquires always
/// exclude each other; re-enter with [`RedlockGuard::reenter`].
///
/// # Keys (on every node)
///
/// `PREFIX+NAME` (hash: owner → hold count, with PEXPIRE), the node's
/// fencing counter `redlatch_lock_token` and the channel
/// `redisson_lock__channel:{PREFIX+NAME}`: the layout of the single-server
/// [`Lock`](crate::Lock) and of Redisson's `RLock`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let masters = testkit::Servers::start(3).unwrap();
/// use std::time::Duration;
///
/// let redlock = redlatch::Redlock::connect(&masters.urls()).await?;
/// let lock = redlock.lock("ledger:close");
/// let guard = lock.acquire_within(Some(Duration::from_secs(1))).await?;
/// assert!(lock.try_acquire().await?.is_none()); // held on a majority
/// let token = guard.token();
/// guard.release().await?;
/// let next = lock.acquire().await?;
/// assert!(next.token() > token);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RedlockLock {
    redlock: Redlock,
    name: Arc<str>,
    /// A fixed lease; `None`: the first node's default lease, renewed.
    lease: Option<Duration>,
}

lease_option!(
    RedlockLock,
    "# let masters = testkit::Servers::start(3).unwrap();\n# let redlock = redlatch::Redlock::connect(&masters.urls()).await?;",
    "redlock.lock(\"report\")",
    "acquire"
);
waiting_methods!(
    RedlockLock => RedlockGuard,
    "[`Error::Timeout`] (the lock stayed held elsewhere for the whole wait)",
    "One attempt over all nodes: the guard if a majority granted it, `None` if another owner holds it on too many nodes. One round trip per node, in parallel (two when a fencing counter lags); [`Error::QuorumFailed`] at once when too few nodes answered.",
    "Waits for a majority as long as `wait` says. With a bounded wait, frozen or slow masters cost the wait, not a node timeout per attempt and the retry policy's delays; a [`Error::QuorumFailed`] whose silent nodes name the node timeout ([`TimeLimit::Node`](crate::TimeLimit::Node)) comes when an attempt failed with no time left for another."
);

/// What one attempt over all nodes came to.
enum Outcome {
    Granted(RedlockGuard),
    Refused(Refusal),
}

/// Why an attempt did not hold a majority.
struct Refusal {
    /// Nodes that granted it (given back since).
    acquired: usize,
    /// The soonest lease end among the nodes held by another owner.
    soonest_free: Option<Duration>,
    failures: Vec<NodeFailure>,
}

impl Redlock {
    /// A handle to the lock `name` on every node (no round trip; the name is
    /// checked when the lock is used). See [`RedlockLock`].
    pub fn lock(&self, name: impl Into<String>) -> RedlockLock {
        RedlockLock::new(self.clone(), name.into())
    }
}

impl RedlockLock {
    pub(crate) fn new(redlock: Redlock, name: String) -> RedlockLock {
        RedlockLock {
            redlock,
            name: Arc::from(name),
            lease: None,
        }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the lock is held on a majority of the nodes, or for at
    /// most the first node's [`wait_timeout`](crate::Settings::wait_timeout)
    /// when it is set (none by default); the lease is the first node's
    /// default lease, renewed on every node until the guard goes, or the
    /// handle's fixed one ([`RedlockLock::with_lease`]: the guard's
    /// [`lost`](RedlockGuard::lost) resolves when its validity, the lease
    /// minus the time the attempt took minus drift, runs out).
    ///
    /// Each attempt sends the acquire script to every node at once, each
    /// bounded by the node timeout: one round trip when the lock is free and
    /// the nodes' fencing counters agree, two when fewer than a majority
    /// returned the highest counter (the token is written back first). A refused attempt gives back what it
    /// took on every node, then waits for the first unlock message from any
    /// node, the soonest end of a holder's lease, or (after a split vote) a
    /// random delay, and tries again.
    ///
    /// # Errors
    /// [`Error::QuorumFailed`] when too few nodes answer for a majority to be
    /// possible (after the first node's retry policy), naming each failed
    /// node and why; [`Error::InvalidName`], [`Error::WrongType`],
    /// [`Error::InvalidDuration`] for a bad lease; [`Error::Timeout`] when
    /// the wait timeout ran out.
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting; an attempt in flight completes on
    /// each node and gives back any hold it took.
    pub fn acquire(&self) -> impl std::future::Future<Output = Result<RedlockGuard>> + Send + '_ {
        self.acquire_within(self.redlock.lead_settings().wait_timeout)
    }

    /// The lock as each node holds it now, in node order: a
    /// [`LockStatus`] or the error that node gave.
    ///
    /// Two round trips per node (as [`Lock::status`](crate::Lock::status)),
    /// all nodes at once, each bounded by the node timeout of the default
    /// lease. Reads only.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; node failures are reported per node.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn status(&self) -> Result<RedlockStatus> {
        LockKeys::new("", &self.name)?;
        let lease_ms = self.redlock.lead_settings().default_lease.as_millis() as u64;
        let limit = self
            .redlock
            .node_timeout(lease_ms)
            .max(Duration::from_millis(500));
        let name = self.name.clone();
        let nodes = &self.redlock.inner.nodes;
        let replies = quorum::fan_out(nodes, "status", limit, |_, client| {
            let lock = client.lock(&*name);
            async move { lock.status().await }
        })
        .await;
        Ok(RedlockStatus {
            name: self.name.to_string(),
            quorum: quorum::majority(nodes.len()),
            nodes: nodes
                .iter()
                .zip(replies)
                .map(|(node, status)| NodeStatus {
                    node: node.label.clone(),
                    status,
                })
                .collect(),
        })
    }

    fn timeout(&self, waited: Duration) -> Error {
        Error::Timeout {
            name: self.name.to_string(),
            waited,
        }
    }

    /// One request per node (node order), all with one fresh owner. Nodes
    /// with the same key prefix (usually all) share one set of key names.
    fn requests(&self, lease_ms: u64) -> Result<Vec<Request>> {
        let owner = self.redlock.anonymous_owner();
        let lead = self.redlock.lead_settings();
        let mut shared: Option<LockKeys> = None;
        let mut requests = Vec::with_capacity(self.redlock.inner.nodes.len());
        for node in &self.redlock.inner.nodes {
            let settings = node.client.as_ref().map(|c| c.core.current_settings());
            let prefix = settings
                .as_ref()
                .map_or(&lead.key_prefix, |s| &s.key_prefix);
            let keys = match &shared {
                // The key is prefix + name: the same length and start, the same prefix.
                Some(keys)
                    if keys.key.len() == prefix.len() + self.name.len()
                        && keys.key.starts_with(prefix.as_str()) =>
                {
                    keys.clone()
                }
                _ => {
                    let keys = LockKeys::new(prefix, &self.name)?;
                    shared = Some(keys.clone());
                    keys
                }
            };
            requests.push(Request {
                keys,
                owner: owner.clone(),
                named_owner: false,
                lease_ms,
                waited_ms: 0,
                wake_always: false,
            });
        }
        Ok(requests)
    }

    async fn acquire_waiting(&self, wait: Wait) -> Result<Option<RedlockGuard>> {
        let span = tracing::debug_span!(
            "redlatch.redlock.acquire",
            lock = %self.name,
            nodes = self.redlock.inner.nodes.len()
        );
        let outcome = self
            .wait_for_majority(wait, self.lease)
            .instrument(span)
            .await;
        if let Ok(Some(guard)) = &outcome {
            tracing::debug!(lock = %self.name, token = guard.token(), "redlatch: Redlock acquired");
        }
        outcome
    }

    async fn wait_for_majority(
        &self,
        wait: Wait,
        fixed_lease: Option<Duration>,
    ) -> Result<Option<RedlockGuard>> {
        let settings = self.redlock.lead_settings();
        let lease_ms = match fixed_lease {
            Some(lease) => limits::lease_millis("lease", lease)?,
            None => limits::watchdog_lease_millis("default lease", settings.default_lease)?,
        };
        LockKeys::new(&settings.key_prefix, &self.name)?;
        let mut acquisition = RedlockAcquisition {
            lock: self,
            lease_ms,
            renewed: fixed_lease.is_none(),
            wait,
            split: false,
        };
        wait_for(&mut acquisition, wait).await
    }

    /// Joins the lock's channel on every connected node.
    fn join_channels(&self, lease_ms: u64) -> Result<Vec<Ticket>> {
        let requests = self.requests(lease_ms)?;
        Ok(self
            .redlock
            .inner
            .nodes
            .iter()
            .zip(&requests)
            .filter_map(|(node, request)| {
                let client = node.client.as_ref()?;
                Some(client.core.wakeups.join(&request.keys.channel()))
            })
            .collect())
    }

    /// One attempt over all nodes, in a task of its own: when the caller
    /// drops the future, the attempt still completes, and a guard nobody
    /// takes is dropped, which releases it.
    async fn attempt(&self, lease_ms: u64, renewed: bool) -> Result<Outcome> {
        let this = self.clone();
        let call = async move { this.attempt_on_nodes(lease_ms, renewed).await };
        // An outcome nobody took holds a guard, which releases when dropped.
        let undo = |unclaimed: Result<Outcome>| async move { drop(unclaimed) };
        hand_over(&self.redlock.background(), call, undo).await
    }

    /// Acquires everywhere at once, then decides.
    async fn attempt_on_nodes(&self, lease_ms: u64, renewed: bool) -> Result<Outcome> {
        let requests = self.requests(lease_ms)?;
        // Cancelled when this attempt's holds are given back: by a refusal
        // here, or by the release of the last guard.
        let released = CancellationToken::new();
        let nodes = &self.redlock.inner.nodes;
        // What the guard's releases find on each node, for late grants.
        let last_release = Arc::new(LastRelease::new(nodes.len()));
        let limit = self.redlock.node_timeout(lease_ms);
        let started = LeaseInstant::now();
        let needed = quorum::majority(nodes.len());
        // Decided at the first majority granted (or once none is possible
        // any more); the slower nodes finish in the background.
        let settled = |replies: &[Option<Result<LockReply>>]| {
            let granted = replies
                .iter()
                .filter(|reply| matches!(reply, Some(Ok(LockReply::Acquired { .. }))))
                .count();
            let running = replies.iter().filter(|reply| reply.is_none()).count();
            granted >= needed || granted + running < needed
        };
        let (replies, stragglers) = quorum::fan_out_until(
            nodes,
            "acquire",
            limit,
            |i, client| {
                // `attempt::attempt` runs in a task of its own: when the limit
                // cuts the wait short, the task still finishes and gives back
                // any hold.
                let client = client.clone();
                let call = LockAttemptAlone(LockAttempt(requests[i].clone(), None));
                async move { attempt::attempt(&client.core, call).await }
            },
            settled,
        )
        .await;
        let pending: Vec<bool> = replies.iter().map(Option::is_none).collect();
        let (answers, mut failures) = quorum::split_partial(nodes, replies);
        if let Some(wrong_type) = failures
            .iter()
            .position(|failure| matches!(*failure.error, Error::WrongType { .. }))
        {
            released.cancel();
            self.give_back(&requests, &answers, &pending).await;
            return Err(*failures.swap_remove(wrong_type).error);
        }
        let tokens: Vec<Option<u64>> = answers
            .iter()
            .map(|answer| match answer {
                Some(LockReply::Acquired(acquired)) => Some(acquired.token),
                _ => None,
            })
            .collect();
        let acquired = tokens.iter().flatten().count();
        let soonest_free = answers
            .iter()
            .filter_map(|answer| match answer {
                Some(LockReply::Held { pttl_ms, .. }) if *pttl_ms >= 0 => {
                    Some(Duration::from_millis(*pttl_ms as u64))
                }
                Some(LockReply::Held { .. }) => Some(NO_EXPIRY_RECHECK),
                _ => None,
            })
            .min();
        if acquired >= needed {
            let token = tokens.iter().flatten().copied().max().unwrap_or_default();
            let fenced = match self.fence(&requests, &tokens, token, limit).await {
                Ok(()) => true,
                Err(fence_failures) => {
                    failures.extend(fence_failures);
                    false
                }
            };
            let valid_until = started + limits::validity(lease_ms);
            if fenced && LeaseInstant::now() < valid_until {
                let ended = Ended {
                    released,
                    last_release,
                };
                self.keep_stragglers(stragglers, &requests, token, ended.clone());
                return Ok(Outcome::Granted(
                    self.guard(requests, token, lease_ms, renewed, started, ended),
                ));
            }
        }
        released.cancel();
        // The calls still running give back what they take (their tasks'
        // undo), and so does the release queued behind them here.
        drop(stragglers);
        self.give_back(&requests, &answers, &pending).await;
        Ok(Outcome::Refused(Refusal {
            acquired,
            soonest_free,
            failures,
        }))
    }

    /// Makes the fencing token stick: the nodes whose counter is below
    /// `token` are raised to it. When a majority of the acquired nodes
    /// already return `token` itself, that is enough and the raise runs in
    /// the background; otherwise it must reach enough nodes for a majority,
    /// before the guard is handed out.
    async fn fence(
        &self,
        requests: &[Request],
        tokens: &[Option<u64>],
        token: u64,
        limit: Duration,
    ) -> std::result::Result<(), Vec<NodeFailure>> {
        let nodes = &self.redlock.inner.nodes;
        let needed = quorum::majority(nodes.len());
        let at_token = tokens.iter().filter(|t| **t == Some(token)).count();
        let lagging: Vec<usize> = (0..tokens.len())
            .filter(|&i| tokens[i].is_some_and(|t| t < token))
            .collect();
        if lagging.is_empty() {
            return Ok(());
        }
        let raise = |i: usize| {
            let client = nodes[i].client.clone();
            let request = requests[i].clone();
            async move {
                let Some(client) = client else {
                    return Ok(false);
                };
                let mut conn = client.core.conn.clone();
                crate::lock::calls::raise_token(&mut conn, &request, token, limit).await
            }
        };
        if at_token >= needed {
            let background = self.redlock.background();
            for i in lagging {
                let raising = raise(i);
                spawn_undo(&background, async move {
                    let _ = raising.await;
                });
            }
            return Ok(());
        }
        let replies =
            futures_util::future::join_all(lagging.iter().map(|&i| raise(i).map(move |r| (i, r))))
                .await;
        let mut raised = at_token;
        let mut failures = Vec::new();
        for (i, reply) in replies {
            match reply {
                Ok(true) => raised += 1,
                Ok(false) => failures.push(NodeFailure {
                    node: nodes[i].label.clone(),
                    error: Box::new(Error::NotHeld {
                        name: self.name.to_string(),
                    }),
                }),
                Err(error) => failures.push(NodeFailure {
                    node: nodes[i].label.clone(),
                    error: Box::new(error),
                }),
            }
        }
        // Fewer than a majority carrying the token: the attempt does not count.
        if raised >= needed {
            Ok(())
        } else {
            Err(failures)
        }
    }

    /// Lets the nodes that had not answered when a majority granted the lock
    /// finish: a hold they take is the guard's too (its renewals and its
    /// release go to every node, behind the grant on the node's connection),
    /// and its counter is raised to `token` when lower, so the token lives
    /// on every node that holds the lock; unless the guard is gone by then,
    /// when the hold is given back, unless the guard's release on that node
    /// deleted it (it ran after the grant, on the same connection).
    fn keep_stragglers(
        &self,
        stragglers: quorum::Stragglers<LockReply>,
        requests: &[Request],
        token: u64,
        ended: Ended,
    ) {
        if stragglers.is_empty() {
            return;
        }
        let nodes: Vec<_> = self
            .redlock
            .inner
            .nodes
            .iter()
            .map(|node| node.client.clone())
            .collect();
        let requests = requests.to_vec();
        // The give-back or write-back is tracked like the stragglers: a
        // process about to exit waits for it too.
        // Both on the clients' runtime, not the caller's.
        let (background, tracker) = (self.redlock.background(), &self.redlock.inner.stragglers);
        let (spawner, give_backs) = (background.clone(), tracker.clone());
        stragglers.finish_in_background(&background, tracker, move |i, reply| {
            let Ok(LockReply::Acquired(Acquired { token: taken, .. })) = reply else {
                return;
            };
            let (Some(client), request) = (nodes[i].clone(), requests[i].clone()) else {
                return;
            };
            let gone = ended.released.is_cancelled();
            if !gone && taken >= token {
                return;
            }
            let limit = Duration::from_millis(request.lease_ms);
            let last_release = ended.last_release.clone();
            spawner.spawn(give_backs.track_future(async move {
                let mut conn = client.core.conn.clone();
                if gone {
                    // The guard's release was sent behind this grant on the
                    // node's connection: once it answers that it deleted
                    // the hold, a give-back would find nothing.
                    if !last_release.deleted(i, limit).await {
                        let _ = crate::lock::calls::release(&mut conn, &request, limit).await;
                    }
                } else {
                    let _ =
                        crate::lock::calls::raise_token(&mut conn, &request, token, limit).await;
                }
            }));
        });
    }

    /// Gives back, on every node, whatever this attempt's owner holds there:
    /// the nodes that granted it, and those still working on it (the release
    /// queues behind the grant on the node's connection). Nodes that timed
    /// out give it back by themselves when their call completes (see
    /// `attempt::attempt`).
    async fn give_back(
        &self,
        requests: &[Request],
        answers: &[Option<LockReply>],
        pending: &[bool],
    ) {
        let nodes = &self.redlock.inner.nodes;
        let limit = self.redlock.node_timeout(requests[0].lease_ms);
        let releases = nodes
            .iter()
            .zip(requests)
            .zip(answers.iter().zip(pending))
            .filter(|(_, (answer, pending))| {
                **pending || matches!(answer, Some(LockReply::Acquired { .. }))
            })
            .filter_map(|((node, request), _)| {
                let client = node.client.clone()?;
                let request = request.clone();
                Some(async move {
                    let mut conn = client.core.conn.clone();
                    let _ = crate::lock::calls::release(&mut conn, &request, limit).await;
                })
            });
        futures_util::future::join_all(releases).await;
    }

    fn guard(
        &self,
        requests: Vec<Request>,
        token: u64,
        lease_ms: u64,
        renewed: bool,
        started: LeaseInstant,
        ended: Ended,
    ) -> RedlockGuard {
        let shared = Arc::new_cyclic(|me: &Weak<RedlockHold>| {
            // The renewal engine renews it by calling back (weakly: the hold
            // must not keep itself alive).
            let renew: Weak<dyn RenewNow> = me.clone();
            let hold = Arc::new(Hold::new(NewHold {
                key: requests[0].keys.key.clone(),
                owner: requests[0].owner.clone(),
                kind: HoldKind::Callback(renew),
                lease_ms,
                renewed,
                token,
                named_owner: false,
                // Validity counts from before the first request went out.
                sent_at: started,
            }));
            RedlockHold::new(
                self.redlock.clone(),
                self.name.clone(),
                requests,
                hold,
                self.redlock.node_timeout(lease_ms),
                ended.released,
                ended.last_release,
            )
        });
        watchdog::start(&shared, started);
        RedlockGuard::new(shared)
    }
}

/// How a granted acquisition's guard ends, as its late grants see it.
#[derive(Clone)]
struct Ended {
    /// Cancelled once the last guard is released.
    released: CancellationToken,
    /// What the guard's releases found on each node.
    last_release: Arc<LastRelease>,
}

/// A Redlock acquire, as the wait loop drives it: each attempt asks every
/// node at once; wake-ups come from whichever node a holder releases first.
struct RedlockAcquisition<'a> {
    lock: &'a RedlockLock,
    lease_ms: u64,
    renewed: bool,
    wait: Wait,
    /// The last attempt was a split vote (some nodes granted it, or none
    /// said when it frees): competitors all retry, so spread out.
    split: bool,
}

impl Acquisition for RedlockAcquisition<'_> {
    type Output = RedlockGuard;

    async fn attempt(&mut self) -> Result<Step<RedlockGuard>> {
        let lock = self.lock;
        let refusal = match lock.attempt(self.lease_ms, self.renewed).await? {
            Outcome::Granted(guard) => {
                return Ok(Step::Done {
                    value: guard,
                    more_left: false,
                });
            }
            Outcome::Refused(refusal) => refusal,
        };
        let nodes = lock.redlock.inner.nodes.len();
        // An outage only when too many nodes failed for any majority. An
        // attempt decided early (no majority possible for this owner) leaves
        // slow nodes unanswered: they may still serve the next attempt, so
        // they count as live, not as failed.
        if nodes - refusal.failures.len().min(nodes) < quorum::majority(nodes) {
            // Too few nodes answer for any majority: an outage, not contention.
            return Err(quorum::failed(
                "acquire",
                &lock.name,
                nodes,
                refusal.acquired,
                refusal.failures,
            ));
        }
        self.split = refusal.acquired > 0 || refusal.soonest_free.is_none();
        let retry_in = refusal
            .soonest_free
            .unwrap_or(lock.redlock.options.retry_jitter)
            .max(Duration::from_millis(1));
        Ok(Step::Busy { retry_in })
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        self.lock.join_channels(self.lease_ms)
    }

    fn wakes(&self) -> Wakes {
        Wakes::One {
            pass_on_busy: false,
        }
    }

    /// An outage is waited out with the retry policy (each attempt has a
    /// fresh owner, and a refused attempt gave back what it took), except
    /// for a single try.
    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        if self.wait == Wait::Once || !matches!(error, Error::QuorumFailed { .. }) {
            return None;
        }
        Some(self.lock.redlock.lead_settings().retry)
    }

    fn pause_after_wake(&self) -> Duration {
        if self.split {
            quorum::jitter(self.lock.redlock.options.retry_jitter)
        } else {
            Duration::ZERO
        }
    }
}

/// A Redlock lock as every node holds it ([`RedlockLock::status`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct RedlockStatus {
    /// The lock's name, without the key prefix.
    pub name: String,
    /// How many nodes make a majority.
    pub quorum: usize,
    /// Each node's view, in node order.
    pub nodes: Vec<NodeStatus>,
}

/// One node's view of a Redlock lock.
#[derive(Debug)]
pub struct NodeStatus {
    /// The node's label.
    pub node: String,
    /// What the node holds, or why it could not say.
    pub status: Result<LockStatus>,
}

impl RedlockStatus {
    /// The owner holding the lock on a majority of the nodes, if one does.
    pub fn majority_holder(&self) -> Option<&str> {
        let owners = self
            .nodes
            .iter()
            .filter_map(|node| node.status.as_ref().ok())
            .flat_map(|status| status.holders.iter().map(|holder| holder.owner.as_str()));
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for owner in owners {
            match counts.iter_mut().find(|(seen, _)| *seen == owner) {
                Some((_, count)) => *count += 1,
                None => counts.push((owner, 1)),
            }
        }
        counts
            .into_iter()
            .find(|(_, count)| *count >= self.quorum)
            .map(|(owner, _)| owner)
    }

    /// The highest fencing token any answering node has handed out.
    pub fn last_token(&self) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|node| node.status.as_ref().ok()?.last_token)
            .max()
    }

    /// How many nodes answered.
    pub fn answered(&self) -> usize {
        self.nodes.iter().filter(|node| node.status.is_ok()).count()
    }
}

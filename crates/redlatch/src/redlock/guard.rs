//! The Redlock guard: proof of a hold on a majority of the nodes, released on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::sync::unpoisoned::Mutex;
use tokio_util::sync::CancellationToken;

use crate::base::request::Request;
use crate::engine::cancel::{hand_over, run_to_end, spawn_undo};
use crate::engine::hold::{Hold, LostReason};
use crate::error::{Error, Result};
use crate::redlock::handle::Redlock;
use crate::redlock::last_release::LastRelease;
use crate::redlock::quorum;
use crate::settings::limits;
use crate::sync::Spawner;

/// What a Redlock acquisition's guards and the renewal engine share.
pub(crate) struct RedlockHold {
    pub(crate) redlock: Redlock,
    pub(crate) name: Arc<str>,
    /// One request per node: its keys (each node's key prefix) and the
    /// owner, the same on every node. The lease is read from `hold`.
    requests: Vec<Request>,
    /// Validity deadline, lease, token and the lost signal; the renewal
    /// engine of the host client shares it.
    pub(crate) hold: Arc<Hold>,
    pub(crate) node_timeout: Duration,
    /// Guards alive for this hold (re-entries included).
    guards: Mutex<usize>,
    /// Cancelled once the last guard is released: stops a renewal in flight.
    pub(crate) stop: CancellationToken,
    /// What its releases found on each node, for the acquisition's late grants.
    last_release: Arc<LastRelease>,
    /// Where the background rest of its calls runs: the first connected
    /// node's client's runtime ([`Redlock::background`]).
    pub(crate) background: Spawner,
}

impl RedlockHold {
    pub(crate) fn new(
        redlock: Redlock,
        name: Arc<str>,
        requests: Vec<Request>,
        hold: Arc<Hold>,
        node_timeout: Duration,
        stop: CancellationToken,
        last_release: Arc<LastRelease>,
    ) -> RedlockHold {
        RedlockHold {
            name,
            requests,
            hold,
            node_timeout,
            guards: Mutex::new(1),
            stop,
            last_release,
            background: redlock.background(),
            redlock,
        }
    }

    /// The client whose watchdog renews this hold: the first connected node's.
    pub(crate) fn host(&self) -> Option<&crate::client::Client> {
        self.redlock
            .inner
            .nodes
            .iter()
            .find_map(|node| node.client.as_ref())
    }

    fn request(&self, node: usize, lease_ms: u64) -> Request {
        let mut request = self.requests[node].clone();
        request.lease_ms = lease_ms;
        request
    }

    fn node_count(&self) -> usize {
        self.redlock.inner.nodes.len()
    }

    fn not_held(&self) -> Error {
        Error::NotHeld {
            name: self.name.to_string(),
        }
    }

    /// Sets the lease to `lease_ms` on every node at once. Counts only when a
    /// majority confirms before the current validity ends; then the validity
    /// restarts from when the calls were sent. One round trip per node, in
    /// parallel, each at most the node timeout.
    pub(crate) async fn renew(&self, lease_ms: u64) -> Result<()> {
        let limit = self.node_timeout;
        let sent_at = LeaseInstant::now();
        let replies = quorum::fan_out(&self.redlock.inner.nodes, "renew", limit, |i, client| {
            let request = self.request(i, lease_ms);
            let mut conn = client.core.conn.clone();
            async move { crate::base::calls::renew_one(&mut conn, &request, limit).await }
        })
        .await;
        let (answers, failures) = quorum::split(&self.redlock.inner.nodes, replies);
        let confirmed = answers.iter().filter(|a| **a == Some(true)).count();
        let gone = answers.iter().filter(|a| **a == Some(false)).count();
        let nodes = self.node_count();
        if confirmed >= quorum::majority(nodes) && LeaseInstant::now() < self.hold.valid_until() {
            self.hold.confirm(sent_at, lease_ms);
            return Ok(());
        }
        if gone > nodes - quorum::majority(nodes) {
            // No majority can confirm any more: the lock is gone.
            self.hold.mark_lost(LostReason::Gone);
            return Err(self.not_held());
        }
        Err(quorum::failed(
            "renew", &self.name, nodes, confirmed, failures,
        ))
    }

    /// Drops one hold on every node at once. One round trip per node, in
    /// parallel, each at most the node timeout.
    async fn release_on_nodes(&self) -> Result<()> {
        let limit = self.node_timeout;
        let lease_ms = self.hold.lease_ms();
        let nodes = self.node_count();
        let needed = quorum::majority(nodes);
        // Done once a majority released it: others can take the lock then.
        // The slower nodes finish in the background (a process that exits
        // at once leaves a minority of holds, which run out with the lease).
        let settled = |replies: &[Option<Result<crate::scripts::released::Released>>]| {
            let released = replies.iter().filter(|r| matches!(r, Some(Ok(_)))).count();
            let running = replies.iter().filter(|r| r.is_none()).count();
            released >= needed || released + running < needed
        };
        let (replies, stragglers) = quorum::fan_out_until(
            &self.redlock.inner.nodes,
            "release",
            limit,
            |i, client| {
                let request = self.request(i, lease_ms);
                let mut conn = client.core.conn.clone();
                let last_release = self.last_release.clone();
                async move {
                    let released = crate::lock::calls::release(&mut conn, &request, limit).await;
                    let deleted = matches!(
                        released,
                        Ok(crate::scripts::released::Released::Unlocked { .. })
                    );
                    last_release.record(i, deleted);
                    released
                }
            },
            settled,
        )
        .await;
        stragglers.finish_in_background(
            &self.background,
            &self.redlock.inner.stragglers,
            |_, _| {},
        );
        let (answers, failures) = quorum::split_partial(&self.redlock.inner.nodes, replies);
        let released = answers.iter().filter(|a| a.is_some()).count();
        if released >= quorum::majority(nodes) {
            return Ok(());
        }
        let not_held = failures
            .iter()
            .filter(|failure| matches!(*failure.error, Error::NotHeld { .. }))
            .count();
        if not_held > nodes - quorum::majority(nodes) || !self.hold.is_held() {
            self.hold.mark_lost(LostReason::Gone);
            return Err(self.not_held());
        }
        Err(quorum::failed(
            "release", &self.name, nodes, released, failures,
        ))
    }

    /// Adds one hold on every node; counts when a majority confirms within
    /// the validity. Returns the nodes that took it (to undo).
    async fn reenter_on_nodes(&self) -> (Result<()>, Vec<bool>) {
        let limit = self.node_timeout;
        let lease_ms = self.hold.lease_ms();
        let sent_at = LeaseInstant::now();
        let replies = quorum::fan_out(&self.redlock.inner.nodes, "reenter", limit, |i, client| {
            let request = self.request(i, lease_ms);
            let mut conn = client.core.conn.clone();
            async move { crate::base::calls::reenter(&mut conn, &request, limit).await }
        })
        .await;
        let nodes = self.node_count();
        let (answers, failures) = quorum::split(&self.redlock.inner.nodes, replies);
        let took: Vec<bool> = answers.iter().map(|a| *a == Some(true)).collect();
        let confirmed = took.iter().filter(|took| **took).count();
        if confirmed >= quorum::majority(nodes) && LeaseInstant::now() < self.hold.valid_until() {
            self.hold.confirm(sent_at, lease_ms);
            return (Ok(()), took);
        }
        let gone = answers.iter().filter(|a| **a == Some(false)).count();
        if gone > nodes - quorum::majority(nodes) || !self.hold.is_held() {
            self.hold.mark_lost(LostReason::Gone);
            return (Err(self.not_held()), took);
        }
        (
            Err(quorum::failed(
                "reenter", &self.name, nodes, confirmed, failures,
            )),
            took,
        )
    }

    /// Gives back holds taken by a re-entry that did not count.
    async fn undo_reenter(&self, took: &[bool]) {
        let limit = self.node_timeout;
        let lease_ms = self.hold.lease_ms();
        let undo = took
            .iter()
            .enumerate()
            .filter(|(_, took)| **took)
            .filter_map(|(i, _)| {
                let client = self.redlock.inner.nodes[i].client.clone()?;
                let request = self.request(i, lease_ms);
                Some(async move {
                    let mut conn = client.core.conn.clone();
                    let _ = crate::lock::calls::release(&mut conn, &request, limit).await;
                })
            });
        futures_util::future::join_all(undo).await;
    }
}

/// One hold on a [`RedlockLock`](crate::RedlockLock): the lock is held on a
/// majority of the nodes (renewed there unless it has a fixed lease) until
/// the guard is released or dropped.
///
/// Dropping a guard releases it in the background; call
/// [`release`](RedlockGuard::release) to learn how it went.
#[must_use = "dropping a guard releases the lock at once"]
pub struct RedlockGuard {
    shared: Arc<RedlockHold>,
    released: bool,
}

impl std::fmt::Debug for RedlockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedlockGuard")
            .field("name", &self.shared.name)
            .field("owner", &self.shared.hold.owner)
            .field("token", &self.shared.hold.token)
            .field("held", &self.is_held())
            .finish()
    }
}

impl RedlockGuard {
    pub(crate) fn new(shared: Arc<RedlockHold>) -> RedlockGuard {
        RedlockGuard {
            shared,
            released: false,
        }
    }

    /// The fencing token: strictly increasing per lock name across the
    /// acquisitions of every Redlock client over the same nodes, as long as
    /// a majority of the nodes keeps its data (`docs/REDLOCK.md` gives the
    /// argument and its limits). Re-entries share the token.
    pub fn token(&self) -> u64 {
        self.shared.hold.token
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The owner field written on every node: `<redlock-id>:#<n>`.
    pub fn owner(&self) -> &str {
        // Made without a client's prefix: kept as given.
        self.shared
            .hold
            .owner
            .as_str(crate::engine::owner_field::OwnerPrefix::none())
    }

    /// The lease set on the nodes.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.shared.hold.lease_ms())
    }

    /// True when the renewal engine keeps extending the lease.
    pub fn is_renewed(&self) -> bool {
        self.shared.hold.renewed()
    }

    /// True while the lock is known to be held on a majority: not found gone
    /// by a renewal, and the validity of the last majority confirmation
    /// (lease − elapsed − drift, on a clock that counts suspended time) has
    /// not run out.
    pub fn is_held(&self) -> bool {
        self.shared.hold.is_held()
    }

    /// Until when the hold is valid, as an instant of the monotonic clock
    /// (translated from the lease clock, which also counts suspended time).
    pub fn valid_until(&self) -> std::time::Instant {
        self.shared.hold.valid_until().to_std()
    }

    /// Resolves when the lock is known to be lost: a renewal found it gone on
    /// too many nodes for a majority, no majority confirmed a renewal before
    /// the validity ran out, or a fixed lease ran out. The future owns what it
    /// needs (move it into a task or a `select!`).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.shared.hold.clone().until_marked_lost()
    }

    /// Why the lock is no longer held, once it is not; `None` while held.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.hold.lost_reason()
    }

    /// Sets the lease to `lease` on every node now (for fixed-lease guards
    /// that need more time). Counts only when a majority confirms before
    /// the current validity ends; the validity then restarts from now.
    ///
    /// One round trip per node, in parallel, each bounded by the node
    /// timeout. Touches `PREFIX+NAME` on every node (PEXPIRE).
    ///
    /// # Errors
    /// [`Error::InvalidDuration`] unless 1 ms ≤ `lease` ≤ 30 days;
    /// [`Error::NotHeld`] when too many nodes no longer hold it;
    /// [`Error::QuorumFailed`] when too few answered in time (the old validity stands).
    ///
    /// # Cancel safety
    /// Dropping the future may leave some nodes extended; the validity is
    /// only moved on a majority confirmation.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = limits::lease_millis("lease", lease)?;
        if !self.is_held() {
            return Err(self.shared.not_held());
        }
        self.shared.renew(lease_ms).await
    }

    /// Takes one more hold for the same owner on every node (hold count + 1,
    /// same token). Counts when a majority confirms within the validity.
    ///
    /// One round trip per node, in parallel, each bounded by the node
    /// timeout. Touches `PREFIX+NAME` on every node.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lock is no longer held;
    /// [`Error::QuorumFailed`] when too few nodes confirmed in time.
    ///
    /// # Cancel safety
    /// Dropping the future gives back the holds it took.
    pub async fn reenter(&self) -> Result<RedlockGuard> {
        if !self.is_held() {
            return Err(self.shared.not_held());
        }
        let shared = self.shared.clone();
        let call = async move {
            let (outcome, took) = shared.reenter_on_nodes().await;
            match outcome {
                Ok(()) => {
                    *shared.guards.lock() += 1;
                    Ok(RedlockGuard::new(shared))
                }
                Err(error) => {
                    shared.undo_reenter(&took).await;
                    Err(error)
                }
            }
        };
        // A guard nobody took releases its hold when dropped.
        let undo = |unclaimed: Result<RedlockGuard>| async move { drop(unclaimed) };
        hand_over(&self.shared.background, call, undo).await
    }

    /// Gives this hold back on every node: the hold count goes down by one,
    /// and the last hold deletes the lock on each node and wakes a waiter.
    /// One round trip per node, in parallel, each bounded by the node
    /// timeout. Touches `PREFIX+NAME` on every node and publishes on its
    /// channel.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lock was no longer held on a majority
    /// (expired or taken over: the work may have overlapped with another
    /// holder). [`Error::QuorumFailed`] when too few nodes answered: the
    /// lock expires there with its lease, nobody renews it any more.
    ///
    /// # Cancel safety
    /// The release runs in a task of its own: dropping the future does not stop it.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        let release = self.stop_and_release();
        run_to_end(&self.shared.background, release).await
    }

    /// As [`release`](Self::release), then waits until the slower nodes
    /// have answered too (each within the node timeout), so no minority of
    /// holds is left to run out with its lease. For a process that exits
    /// after its release, like `redlatch run`: `release` returns at the
    /// first majority, and calls still running when the process exits are
    /// cut off. It waits for every such call of this Redlock, at most twice
    /// the node timeout.
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlatch::Redlock) -> redlatch::Result<()> {
    /// let guard = redlock.lock("nightly-report").acquire().await?;
    /// // ... the work ...
    /// guard.release_everywhere().await?; // then exit
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`release`](Self::release).
    pub async fn release_everywhere(self) -> Result<()> {
        let stragglers = self.shared.redlock.inner.stragglers.clone();
        let limit = self.shared.node_timeout;
        let released = self.release().await;
        stragglers.close();
        // Bounded: every straggler is a call with the node timeout.
        let _ = tokio::time::timeout(limit + limit, stragglers.wait()).await;
        stragglers.reopen();
        released
    }

    /// Stops tracking this guard; returns the release, to run in a task of its own.
    fn stop_and_release(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let shared = self.shared.clone();
        {
            let mut guards = shared.guards.lock();
            *guards = guards.saturating_sub(1);
            if *guards == 0 {
                shared.stop.cancel();
                if let Some(host) = shared.host() {
                    host.core
                        .watchdog
                        .remove_guard(&shared.hold, shared.hold.renewed());
                }
            }
        }
        async move { shared.release_on_nodes().await }
    }
}

impl Drop for RedlockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.released = true;
            let release = self.stop_and_release();
            spawn_undo(&self.shared.background, async move {
                let _ = release.await;
            });
        }
    }
}

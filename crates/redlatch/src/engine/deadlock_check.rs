//! The deadlock check a waiter runs after each busy attempt: one call of
//! `deadlock_check.lua`, which either names the cycle the wait would close
//! or writes the waiter's wait-for edge ([`WaitEdge`]). Any failure of the
//! check (an ACL without the edge keys, a timeout) costs the waiter the
//! detection of that round, never its acquire.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::deadlock::scripts::DEADLOCK_CHECK;
use crate::deadlock::{MAX_EDGE_LIFE, WAIT_KEY_PREFIX, party_of};
use crate::engine::context::Core;
use crate::engine::wait_edge::WaitEdge;
use crate::scripts::keys::hash_tag;
use crate::transport::capabilities::Support;
use crate::wait_link::WaitLink;

/// The longest cycle looked for, in locks.
pub(crate) const MAX_DEPTH: u32 = 16;

/// How long an edge outlives the waiter's next check: a waiter alive
/// rewrites it by then; a dead one's lapses soon after.
pub(crate) const EDGE_MARGIN: Duration = Duration::from_secs(1);

/// The longest a waiter with a wait-for edge parks before it attempts (and
/// checks, rewriting its edge) again: a margin short of [`MAX_EDGE_LIFE`].
pub(crate) const REWRITE_EVERY: Duration = MAX_EDGE_LIFE.saturating_sub(EDGE_MARGIN);

/// The least time between two checks of one wait: a waiter that polls (a
/// spin lock, a token lock without its watch) attempts every few ms, and a
/// check at each would double its calls. The check at a wait's first busy
/// attempt is never skipped: the closer of a cycle is refused at once. A
/// cycle missed then (a member's edge lapsed) is found this much later.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(200);

/// What a waiter taking part in deadlock detection tells the wait loop
/// ([`Acquisition::waits_for`](crate::engine::wait::Acquisition::waits_for)).
pub(crate) struct WaitsFor<'a> {
    /// The waiter's client.
    pub(crate) core: &'a Arc<Core>,
    /// The key of the lock it waits for.
    pub(crate) key: &'a str,
    /// The owner field it acquires as.
    pub(crate) owner: &'a str,
}

/// One check, its keys and arguments made.
pub(crate) struct Check {
    core: Arc<Core>,
    lock: String,
    wait_key: String,
    edges: String,
    cluster: bool,
}

impl Check {
    /// The check of `waits`; `None` when the client does not detect
    /// deadlocks, or on a cluster for a lock key with no hash tag (its
    /// edges could not live in its slot).
    pub(crate) fn of(waits: WaitsFor<'_>) -> Option<Check> {
        let core = waits.core;
        // A server without scripting (a token lock served by SET IFEQ)
        // cannot run the check.
        if !core.deadlock_detection || core.capabilities.scripting == Support::Absent {
            return None;
        }
        let prefix = core.current_settings().key_prefix.clone();
        let cluster = core.conn.is_cluster();
        let edges = if cluster {
            format!("{prefix}{WAIT_KEY_PREFIX}{{{}}}:", hash_tag(waits.key)?)
        } else {
            format!("{prefix}{WAIT_KEY_PREFIX}")
        };
        let party = party_of(waits.owner);
        Some(Check {
            core: core.clone(),
            lock: waits.key.to_owned(),
            wait_key: format!("{edges}{party}"),
            edges,
            cluster,
        })
    }

    /// Runs the check with an edge living `edge_ms`; `edge` becomes (or
    /// stays) this waiter's edge. Returns the cycle, if the wait would
    /// close one (the edge is gone then).
    pub(crate) async fn run(
        self,
        edge_ms: u64,
        edge: &mut Option<Box<WaitEdge>>,
    ) -> Option<Vec<WaitLink>> {
        match edge {
            Some(edge) if edge.key() == self.wait_key => edge.checked_now(),
            // None yet, or another key's (the key prefix changed): that
            // one goes.
            _ => {
                *edge = Some(Box::new(WaitEdge::new(
                    self.core.clone(),
                    self.wait_key.clone(),
                )));
            }
        }
        let mut conn = self.core.conn.clone();
        let limit = self.core.current_settings().response_timeout;
        let mut invocation = DEADLOCK_CHECK.key(&self.lock);
        invocation
            .key(&self.wait_key)
            .arg(edge_ms.max(1))
            .arg(MAX_DEPTH)
            .arg(&self.edges)
            .arg(if self.cluster { "1" } else { "0" });
        let call = invocation.invoke_async::<Value>(&mut conn);
        let reply = match tokio::time::timeout(limit, call).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => {
                tracing::debug!(%error, lock = self.lock, "redlatch: deadlock check failed");
                return None;
            }
            Err(_) => {
                tracing::debug!(lock = self.lock, "redlatch: deadlock check unanswered");
                return None;
            }
        };
        let cycle = cycle_of(reply)?;
        if let Some(edge) = edge.take() {
            // The script deleted it.
            edge.forget();
        }
        let closing = cycle.last()?;
        if !self.live_hold(closing) {
            // The hold that closes the cycle is this client's, but no
            // guard has it: one being given back (a guard dropped, an
            // attempt cancelled just as it took the lock). It goes in a
            // moment; waiting for it is no deadlock.
            tracing::debug!(
                lock = closing.lock,
                holder = closing.holder,
                "redlatch: a hold being given back, not a deadlock"
            );
            return None;
        }
        Some(cycle)
    }

    /// Whether the link that closes a cycle (held by the waiter's own
    /// party) is a live hold: any other client's hold is taken as one
    /// (only its client knows); one of this client counts while a guard
    /// has it (the watchdog tracks every guard's hold). Not a hold being
    /// given back (a guard dropped, an attempt cancelled as it took the
    /// lock), nor one a fair lock's release handed to this very waiter
    /// since its attempt (its next attempt takes it).
    fn live_hold(&self, link: &WaitLink) -> bool {
        let own = link
            .holder
            .strip_prefix(&*self.core.id.to_string())
            .is_some_and(|rest| rest.starts_with(':'));
        if !own {
            return true;
        }
        let watchdog = &self.core.watchdog;
        watchdog.holds_any(&link.lock, &link.holder)
            || link
                .holder
                .strip_suffix(":write")
                .is_some_and(|owner| watchdog.holds_any(&link.lock, owner))
    }
}

/// The cycle in the script's reply: `{lock, holder, party, ...}`; an empty
/// list (no cycle) or a reply of another shape is `None`.
fn cycle_of(reply: Value) -> Option<Vec<WaitLink>> {
    let Value::Array(items) = reply else {
        return None;
    };
    let texts: Vec<String> = items
        .into_iter()
        .map(|item| redis::from_redis_value::<String>(item).ok())
        .collect::<Option<_>>()?;
    if texts.is_empty() || !texts.len().is_multiple_of(3) {
        return None;
    }
    Some(
        texts
            .chunks_exact(3)
            .map(|link| WaitLink {
                lock: link[0].clone(),
                holder: link[1].clone(),
                party: link[2].clone(),
            })
            .collect(),
    )
}

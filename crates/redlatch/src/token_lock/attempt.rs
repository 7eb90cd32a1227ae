//! The token lock's plug-ins: one acquire attempt as the engine runs it
//! ([`TokenAttempt`], an [`AttemptCall`]: undone by the engine's one
//! policy), and its acquire as the wait loop drives it ([`Waiting`], an
//! [`Acquisition`]).
//!
//! A release by `DELIFEQ` publishes nothing, so a waiter learns of it in
//! one of three ways (docs/SAFETY.md, "Token lock"):
//! - its key is tracked on the loss watch's connection (`CLIENT CACHING
//!   yes` + `PTTL`, read after the waiter registered itself; on a cluster,
//!   the watch's connection to the slot's master): the server pushes an
//!   invalidation at the key's next change (the release, the expiry, a
//!   delete, a renewal, the slot moving away), and the watch wakes the
//!   waiter;
//! - a release by its own client wakes it at once ([`Wakeups::nudge_local`]);
//! - where the watch cannot track the key (a lean client, a server that
//!   refuses tracking, a slot half-way through a classic migration), it
//!   looks again after a back-off that doubles from [`POLL`]'s first delay
//!   to its longest.
//!
//! A tracking waiter also looks again after [`TRACKED_RECHECK`] at the
//! latest (or at the holder's lease end, if sooner).
//!
//! [`Wakeups::nudge_local`]: crate::engine::wakeup::Wakeups::nudge_local

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::acquire::Terms;
use crate::engine::attempt::attempt;
use crate::engine::context::Core;
use crate::engine::deadlock_check::WaitsFor;
use crate::engine::primitive::AttemptCall;
use crate::engine::wait::{Acquisition, Step};
use crate::engine::wakeup::{Nudge, Ticket};
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::scripts::released::Released;
use crate::settings::RetryPolicy;
use crate::token_lock::calls::{self, Attempted, Route};
use crate::token_lock::guard::TokenGuard;
use crate::token_lock::request::{TokenAttempt, channel};
use crate::transport::Connection;

/// A waiter without the loss watch's tracking looks again after this
/// back-off: 2 ms, doubling, at most 100 ms.
pub(crate) const POLL: RetryPolicy = RetryPolicy {
    attempts: u32::MAX,
    base_delay: Duration::from_millis(2),
    max_delay: Duration::from_millis(100),
};

/// A tracking waiter looks again after this long at the latest, whatever
/// the holder's lease: the safety net for a watch connection that stalls
/// silently (no invalidation comes, and nothing tells the waiter), as a
/// semaphore waiter's re-check is for a lost message. One `SET` a second
/// per waiting client.
pub(crate) const TRACKED_RECHECK: Duration = Duration::from_secs(1);

/// A wake-up this soon after the waiter's last look that finds the same
/// holder changed nothing (a full tracking table evicting the key, each
/// look evicting another waiter's: the server tells of every eviction):
/// the next look then waits [`POLL`]'s back-off. At most an eighth of the
/// waiter's lease, so that a holder's renewals (a third of the lease
/// apart, where holders share the lease) are not taken for a spin.
const SPIN_WINDOW: Duration = Duration::from_millis(50);

impl AttemptCall for TokenAttempt {
    type Reply = Attempted;

    fn key(&self) -> &str {
        &self.keys.key
    }

    fn named(&self) -> bool {
        false
    }

    fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    fn send(
        &self,
        core: &Core,
        sent_at: LeaseInstant,
    ) -> impl Future<Output = Result<Attempted>> + Send + 'static + use<> {
        let mut conn = core.conn.clone();
        let limit = core.current_settings().response_timeout;
        let call = self.clone();
        async move {
            calls::acquire(
                &mut conn,
                &call.keys,
                &call.token,
                call.lease_ms,
                call.fenced,
                sent_at,
                limit,
            )
            .await
        }
    }

    fn took_hold(reply: &Attempted) -> bool {
        matches!(reply, Attempted::Acquired { .. })
    }

    async fn release(&self, mut conn: Connection, limit: Duration) -> Result<Released> {
        match calls::release(
            &mut conn,
            &self.keys.key,
            &self.token,
            self.release_by,
            limit,
        )
        .await?
        {
            true => Ok(Released::Unlocked { receivers: 0 }),
            false => Err(Error::NotHeld {
                name: self.keys.name().to_owned(),
            }),
        }
    }
}

/// A token lock's acquire, as the wait loop drives it.
pub(crate) struct Waiting {
    pub(crate) core: Arc<Core>,
    pub(crate) call: TokenAttempt,
    pub(crate) terms: Terms,
    pub(crate) route: Route,
    /// Wakes this waiter's channel: set once it joined it.
    pub(crate) nudge: Option<Nudge>,
    /// Looks taken without tracking, for the poll's back-off.
    pub(crate) polls: u32,
    /// Wake-ups in a row that changed nothing ([`SPIN_WINDOW`]), for the
    /// back-off of the next look.
    pub(crate) idle_wakes: u32,
    /// The holder the last look found (its digest; `None`: not named),
    /// and when that look ended.
    pub(crate) last_look: Option<(Option<u64>, tokio::time::Instant)>,
}

impl Acquisition for Waiting {
    type Output = TokenGuard;

    async fn attempt(&mut self) -> Result<Step<TokenGuard>> {
        let woken_at = tokio::time::Instant::now();
        if self.idle_wakes > 0 {
            // Bounded by the wait's own end: the wait loop cuts the attempt.
            tokio::time::sleep(POLL.delay(self.idle_wakes - 1)).await;
        }
        let core = &self.core;
        match attempt(core, self.call.clone()).await? {
            Attempted::Acquired { fence, sent_at } => Ok(Step::Done {
                value: TokenGuard::register(
                    core,
                    &self.call,
                    &self.terms,
                    self.route,
                    fence,
                    sent_at,
                ),
                more_left: false,
            }),
            Attempted::Held { holder } => {
                let window = SPIN_WINDOW.min(Duration::from_millis(self.call.lease_ms / 8));
                let changed_nothing = self.last_look.is_some_and(|(seen, ended)| {
                    seen == holder && woken_at.saturating_duration_since(ended) < window
                });
                self.idle_wakes = match changed_nothing {
                    true => self.idle_wakes.saturating_add(1),
                    false => 0,
                };
                let lease = Duration::from_millis(self.call.lease_ms);
                let Some(nudge) = &self.nudge else {
                    // Not listening yet: the wait loop joins, then attempts again.
                    return Ok(Step::Busy { retry_in: lease });
                };
                let limit = core.current_settings().response_timeout;
                let retry_in = match calls::look(core, &self.call.keys.key, nudge, limit).await {
                    Some(look) if look.tracked => {
                        self.polls = 0;
                        let until_change = match look.pttl_ms {
                            // Gone since the attempt: try again at once.
                            -2 => Duration::ZERO,
                            // No expiry (not a lock of ours): its change wakes us.
                            -1 => lease,
                            pttl => Duration::from_millis(u64::try_from(pttl).unwrap_or(0) + 1),
                        };
                        until_change.min(TRACKED_RECHECK)
                    }
                    _ => {
                        let delay = POLL.delay(self.polls);
                        self.polls = self.polls.saturating_add(1);
                        delay
                    }
                };
                self.last_look = Some((holder, tokio::time::Instant::now()));
                Ok(Step::Busy { retry_in })
            }
        }
    }

    /// The key's value is the holder's token, its owner field.
    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        Some(WaitsFor {
            core: &self.core,
            key: &self.call.keys.key,
            owner: &self.call.token,
        })
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        let ticket = self.core.wakeups.join_local(&channel(&self.call.keys.key));
        self.nudge = Some(ticket.nudge());
        Ok(vec![ticket])
    }

    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        let retry = self.terms.retry_after(&self.core, error)?;
        self.call.token = self.terms.owner.clone();
        Some(retry)
    }
}

//! The one wait loop every primitive's acquire runs: attempt → park on a
//! wake-up or a deadline → attempt again.
//!
//! A primitive says what an attempt is and what waiting holds
//! ([`Acquisition`]); the loop owns everything else: the caller's deadline,
//! joining the wake-up channels *before* the second attempt (an unlock in
//! between would otherwise be missed), parking, passing on a wake-up its
//! taker cannot use, retrying after connection errors when the primitive says
//! that is safe, and giving up. Cancellation needs nothing here: every
//! attempt is a [`hand_over`](crate::engine::cancel::hand_over), and
//! whatever a waiter holds (a channel membership, a place in line) is a value
//! whose `Drop` lets go of it.

use std::future::Future;
use std::time::Duration;

use crate::engine::wakeup::{Ticket, Wake};
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::settings::RetryPolicy;

/// How long an acquire may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// One attempt, no waiting (`try_*`).
    Once,
    /// Until the lock is taken or this much time has passed.
    For(Duration),
    /// Until the lock is taken.
    Forever,
}

impl Wait {
    /// The instant the wait ends; `None` when it never does (or too far off
    /// to represent).
    pub(crate) fn deadline(self, started: LeaseInstant) -> Option<LeaseInstant> {
        match self {
            Wait::Once => Some(started),
            Wait::For(wait) => started.checked_add(wait),
            Wait::Forever => None,
        }
    }
}

/// What one attempt found.
pub(crate) enum Step<T> {
    /// Taken. `more_left`: the release that woke us freed more than we took
    /// (permits): the next parked waiter should look too.
    Done { value: T, more_left: bool },
    /// Not now. Try again after `retry_in` at the latest (the holder's lease
    /// end, a re-check, a place to renew) unless a wake-up comes first.
    Busy { retry_in: Duration },
}

/// How a message on a primitive's channel is shared among this client's waiters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wakes {
    /// One waiter per message, oldest first: the others would find the lock
    /// taken again. A waiter that cannot use it passes it on.
    One {
        /// Pass a wake-up on when the attempt finds too little free (a
        /// semaphore waiter wanting more permits than were released), not
        /// only when it fails.
        pass_on_busy: bool,
    },
    /// Every waiter: a release may let many in (readers).
    All,
}

/// A primitive's acquire, as the wait loop drives it.
pub(crate) trait Acquisition: Send {
    /// What a successful acquire returns (a guard, a permit).
    type Output: Send;

    /// One attempt. One round trip, usually.
    fn attempt(&mut self) -> impl Future<Output = Result<Step<Self::Output>>> + Send;

    /// Joins the channels whose messages may make the next attempt succeed.
    fn join(&mut self) -> Result<Vec<Ticket>>;

    /// How messages on those channels are shared: by default one waiter
    /// per message (a lock: the others would find it taken again).
    fn wakes(&self) -> Wakes {
        Wakes::One {
            pass_on_busy: false,
        }
    }

    /// An attempt failed with `error`. Returns the retry policy when trying
    /// again is safe (the outcome of the failed attempt has been undone or
    /// cannot matter, e.g. a fresh anonymous owner takes over); `None` gives
    /// the error to the caller. Called with the tickets dropped: a fresh
    /// owner may wait on other channels.
    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy>;

    /// The wait ended without success: give back what waiting held (a place
    /// in line, a writer's claim) before returning.
    fn give_up(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// True while this waiter holds a claim to the lock's next turn: it is
    /// woken before this client's other waiters (the freed lock would
    /// refuse them), and a wake-up it could not use once it lost the claim
    /// goes on to the next.
    fn goes_first(&self) -> bool {
        false
    }

    /// A pause after each wake-up, to spread out competitors that all retry
    /// at once (Redlock after a split vote).
    fn pause_after_wake(&self) -> Duration {
        Duration::ZERO
    }
}

/// Runs `acquisition` until it succeeds, `wait` (counted from now) runs out
/// (`Ok(None)`), or an attempt fails for good: [`wait_from`] for a call that
/// has done nothing before its wait.
pub(crate) async fn wait_for<A: Acquisition>(
    acquisition: &mut A,
    wait: Wait,
) -> Result<Option<A::Output>> {
    wait_from(acquisition, wait, LeaseInstant::now(), Vec::new(), false).await
}

/// Runs `acquisition` until it succeeds, `wait` (counted from `started`,
/// when the caller's call began: one deadline per call) runs out
/// (`Ok(None)`), or an attempt fails for good. `tickets` are channel
/// memberships the caller made already (a lock that joined its client's
/// queue of waiters), `woken` whether a message ended the caller's own
/// first park.
pub(crate) async fn wait_from<A: Acquisition>(
    acquisition: &mut A,
    wait: Wait,
    started: LeaseInstant,
    mut tickets: Vec<Ticket>,
    mut woken: bool,
) -> Result<Option<A::Output>> {
    let deadline = wait.deadline(started);
    let remaining =
        |now: LeaseInstant| deadline.map_or(Duration::MAX, |at| at.saturating_duration_since(now));
    let wakes = acquisition.wakes();
    let mut retries = 0;
    // This call's wait was counted (once per call).
    let mut counted = false;
    // Per ticket, the subscription generation and messages seen before the
    // attempt: a park returns at once for anything newer.
    let mut marks: Vec<(u64, u64)> = Vec::with_capacity(tickets.len().max(1));
    loop {
        marks.clear();
        marks.extend(tickets.iter().map(|t| (t.epoch(), t.messages())));
        let was_first = acquisition.goes_first();
        let step = match acquisition.attempt().await {
            Ok(step) => step,
            Err(error) => {
                if woken {
                    pass_on(&tickets);
                }
                tickets.clear();
                let Some(policy) = acquisition.retry_after(&error) else {
                    return Err(error);
                };
                // Retries follow the retry policy, not the wait: a single try
                // also rides out a short outage.
                if retries >= policy.attempts {
                    return Err(error);
                }
                tracing::debug!(%error, retry = retries, "redlatch: attempt failed, retrying");
                tokio::time::sleep(policy.delay(retries)).await;
                retries += 1;
                woken = false;
                continue;
            }
        };
        retries = 0;
        let retry_in = match step {
            Step::Done { value, more_left } => {
                if more_left {
                    // One message wakes one waiter: let the next one look too.
                    tickets.iter().for_each(Ticket::pass_on);
                }
                return Ok(Some(value));
            }
            Step::Busy { retry_in } => retry_in,
        };
        let first = acquisition.goes_first();
        if woken && (wakes == (Wakes::One { pass_on_busy: true }) || (was_first && !first)) {
            // Woken first as a claimant, it lost the claim to a longer
            // waiter, who may be parked here too.
            pass_on(&tickets);
        }
        let now = LeaseInstant::now();
        if deadline.is_some_and(|at| now >= at) {
            acquisition.give_up().await;
            return Ok(None);
        }
        let limit = retry_in.min(remaining(now));
        if tickets.is_empty() {
            // Subscribe, then try again: a release between the attempt and
            // the subscription would otherwise go unnoticed. A primitive
            // with nowhere to listen (a spin lock; Redlock with no node
            // reachable) comes back here each round: one contended wait.
            if !counted {
                crate::metrics::contended_wait();
                counted = true;
            }
            tickets = acquisition.join()?;
            if tickets.is_empty() {
                // Nowhere to listen (no node reachable): wait the re-check out.
                tokio::time::sleep(limit).await;
            }
            for ticket in &tickets {
                ticket.note_lease_end(now + retry_in);
            }
            futures_util::future::join_all(tickets.iter().map(|t| t.subscribed(limit))).await;
            woken = false;
        } else {
            for ticket in &tickets {
                ticket.note_lease_end(now + retry_in);
            }
            let wake = park_on_any(&tickets, &marks, limit, first).await;
            record_wake(wake);
            woken = wake == Wake::Message;
        }
        let pause = acquisition.pause_after_wake();
        if !pause.is_zero() {
            tokio::time::sleep(pause.min(remaining(LeaseInstant::now()))).await;
        }
    }
}

/// Counts how a park ended.
pub(crate) fn record_wake(wake: Wake) {
    crate::metrics::woken(match wake {
        Wake::Message => "message",
        Wake::TimedOut => "lease_end",
        Wake::Resubscribed => "resubscribed",
    });
}

/// Hands a wake-up this waiter could not use to the next waiter.
fn pass_on(tickets: &[Ticket]) {
    tickets.iter().for_each(Ticket::pass_on_unused);
}

/// Parks on every ticket at once until the first wakes (or `limit`);
/// `first`: as the claimant of the lock's next turn.
async fn park_on_any(
    tickets: &[Ticket],
    marks: &[(u64, u64)],
    limit: Duration,
    first: bool,
) -> Wake {
    match (tickets, marks) {
        // The usual case, one channel: no boxing.
        ([ticket], [mark]) => park(ticket, *mark, limit, first).await,
        _ => {
            let parked = tickets
                .iter()
                .zip(marks)
                .map(|(ticket, mark)| Box::pin(park(ticket, *mark, limit, first)));
            futures_util::future::select_all(parked).await.0
        }
    }
}

/// Parks on one ticket until a message it has not seen (one that came
/// after `seen`), a resubscription after `epoch`, or `limit`.
async fn park(ticket: &Ticket, (epoch, seen): (u64, u64), limit: Duration, first: bool) -> Wake {
    ticket.park(epoch, seen, limit, first).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_attempt_ends_at_once_and_a_long_wait_never() {
        let now = LeaseInstant::now();
        assert_eq!(Wait::Once.deadline(now), Some(now));
        assert_eq!(
            Wait::For(Duration::from_secs(1)).deadline(now),
            Some(now + Duration::from_secs(1))
        );
        assert_eq!(Wait::For(Duration::MAX).deadline(now), None);
        assert_eq!(Wait::Forever.deadline(now), None);
    }
}

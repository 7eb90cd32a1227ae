//! The one wait loop every primitive's acquire runs: attempt → park on a
//! wake-up or a deadline → attempt again.
//!
//! A primitive says what an attempt is and what waiting holds
//! ([`Acquisition`]); the loop owns everything else: the caller's deadline,
//! joining the wake-up channels *before* the second attempt (an unlock in
//! between would otherwise be missed), parking, passing on a wake-up its
//! taker cannot use, retrying after connection errors when the primitive says
//! that is safe, and giving up. A bounded wait ([`Wait::For`]) is one
//! deadline for the whole call (invariant (f), docs/SAFETY.md): each attempt
//! is cut off where the wait ends (min(response timeout, time left), at
//! least [`ATTEMPT_FLOOR`]), a retry's back-off that would reach the
//! deadline is not slept, and the withdrawal of what waiting left gets
//! [`GIVE_UP_GRACE`] at most before it goes on in the background.
//! Cancellation needs nothing here: every
//! attempt is a [`hand_over`](crate::engine::cancel::hand_over), and
//! whatever a waiter holds (a channel membership, a place in line) is a value
//! whose `Drop` lets go of it.

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Either;

use crate::engine::deadlock_check::{CHECK_EVERY, Check, EDGE_MARGIN, REWRITE_EVERY, WaitsFor};
use crate::engine::wait_edge::WaitEdge;
use crate::engine::wakeup::{Ticket, Wake};
use crate::error::{Error, Result, TimeLimit};
use crate::lease_clock::LeaseInstant;
use crate::settings::RetryPolicy;

/// The least time an attempt of a bounded wait is given before it is cut
/// off: an attempt that starts just before the wait ends (after the local
/// queue or the courtesy took most of it) still gets a healthy server's
/// answer, rather than an error blaming the server's silence. The most a
/// bounded acquire can run past its wait is this plus [`GIVE_UP_GRACE`].
const ATTEMPT_FLOOR: Duration = Duration::from_millis(25);

/// How long a bounded wait that ran out waits for the withdrawal of what
/// waiting left (a place in line, a claim) before returning; the
/// withdrawal goes on in the background past it (a stalled server).
const GIVE_UP_GRACE: Duration = Duration::from_millis(200);

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
    /// The wait of an `acquire_within(wait)`: `None` waits for ever, a
    /// duration at most that long (a zero one makes one attempt).
    pub(crate) fn within(wait: Option<Duration>) -> Wait {
        match wait {
            None => Wait::Forever,
            Some(Duration::ZERO) => Wait::Once,
            Some(wait) => Wait::For(wait),
        }
    }

    /// The instant the wait ends; `None` when it never does (or too far off
    /// to represent).
    pub(crate) fn deadline(self, started: LeaseInstant) -> Option<LeaseInstant> {
        match self {
            Wait::Once => Some(started),
            Wait::For(wait) => started.checked_add(wait),
            Wait::Forever => None,
        }
    }

    /// The deadline that cuts calls off, and the wait it ends: a bounded
    /// wait's. A single try (or a zero wait, which makes one attempt) and
    /// an unbounded wait leave each call to the response timeout.
    pub(crate) fn cut_off(self, started: LeaseInstant) -> Option<Deadline> {
        match self {
            Wait::For(wait) if !wait.is_zero() => Some(Deadline {
                at: started.checked_add(wait)?,
                wait,
            }),
            _ => None,
        }
    }
}

/// The end of a bounded wait: every call, retry and back-off of the
/// acquire fits before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    /// When the wait ends.
    pub(crate) at: LeaseInstant,
    /// The caller's wait, which the error of a call cut off names.
    pub(crate) wait: Duration,
}

impl Deadline {
    /// Time left from `now`.
    pub(crate) fn left(&self, now: LeaseInstant) -> Duration {
        self.at.saturating_duration_since(now)
    }
}

/// `call`, cut off when `deadline` (if any) passes (but not before
/// [`ATTEMPT_FLOOR`]) with [`Error::ResponseTimeout`] naming the caller's
/// wait. Dropping a call is safe: every acquire attempt is a
/// [`hand_over`](crate::engine::cancel::hand_over), which completes or
/// undoes it in the background.
///
/// A plain future, not an `async fn`: a waiter holds it while parked, and
/// the timer is boxed, so it adds a pointer to the attempt's size (an
/// `async fn` would keep room for the call twice, and the timer inline).
pub(crate) fn within<F>(deadline: Option<Deadline>, op: &'static str, call: F) -> Within<F> {
    let cut = deadline.map(|deadline| {
        Box::pin(Cut {
            sleep: tokio::time::sleep(deadline.left(LeaseInstant::now()).max(ATTEMPT_FLOOR)),
            op,
            wait: deadline.wait,
        })
    });
    Within { call, cut }
}

pin_project_lite::pin_project! {
    /// See [`within`].
    pub(crate) struct Within<F> {
        #[pin]
        call: F,
        cut: Option<Pin<Box<Cut>>>,
    }
}

pin_project_lite::pin_project! {
    /// Where a call is cut off, and what its error says.
    pub(crate) struct Cut {
        #[pin]
        sleep: tokio::time::Sleep,
        op: &'static str,
        wait: Duration,
    }
}

impl<T, F: Future<Output = Result<T>>> Future for Within<F> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.project();
        if let Poll::Ready(outcome) = this.call.poll(cx) {
            return Poll::Ready(outcome);
        }
        let Some(cut) = this.cut.as_mut() else {
            return Poll::Pending;
        };
        let cut = cut.as_mut().project();
        match cut.sleep.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Error::ResponseTimeout {
                op: cut.op,
                limit: TimeLimit::Wait(*cut.wait),
            })),
            Poll::Pending => Poll::Pending,
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

    /// Called once the channels [`join`](Self::join) returned are
    /// subscribed, in place of the attempt that otherwise follows: a
    /// cheaper look at what a message missed before the subscription could
    /// have announced. `Some(retry_in)`: nothing, park now (the look began
    /// after the subscription, so every later message is heard); `None`:
    /// attempt again. Only for channels of this waiter alone, new with
    /// this acquire (a fair lock waiter's own): every message on them
    /// counts, none came before the attempt that made the waiter wait.
    fn recheck(&mut self) -> impl Future<Output = Option<Duration>> + Send {
        async { None }
    }

    /// A pause after each wake-up, to spread out competitors that all retry
    /// at once (Redlock after a split vote).
    fn pause_after_wake(&self) -> Duration {
        Duration::ZERO
    }

    /// Deadlock detection (`crate::deadlock`): the lock this waiter waits
    /// for and the owner field it acquires as, asked after each busy
    /// attempt. By default `None`: the primitive takes no part (nothing
    /// written, nothing checked).
    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        None
    }
}

/// The channel memberships of one wait: the usual one kept inline, not in
/// a vector of its own (a parked waiter keeps it; measure 5).
pub(crate) enum Tickets {
    None,
    One(Ticket),
    Many(Vec<Ticket>),
}

impl From<Vec<Ticket>> for Tickets {
    fn from(mut tickets: Vec<Ticket>) -> Tickets {
        match tickets.len() {
            0 => Tickets::None,
            1 => Tickets::One(tickets.pop().expect("one")),
            _ => Tickets::Many(tickets),
        }
    }
}

impl Deref for Tickets {
    type Target = [Ticket];

    fn deref(&self) -> &[Ticket] {
        match self {
            Tickets::None => &[],
            Tickets::One(ticket) => std::slice::from_ref(ticket),
            Tickets::Many(tickets) => tickets,
        }
    }
}

impl DerefMut for Tickets {
    fn deref_mut(&mut self) -> &mut [Ticket] {
        match self {
            Tickets::None => &mut [],
            Tickets::One(ticket) => std::slice::from_mut(ticket),
            Tickets::Many(tickets) => tickets,
        }
    }
}

/// Runs `acquisition` until it succeeds, `wait` (counted from now) runs out
/// (`Ok(None)`), or an attempt fails for good: [`wait_from`] for a call that
/// has done nothing before its wait.
pub(crate) async fn wait_for<A: Acquisition>(
    acquisition: &mut A,
    wait: Wait,
) -> Result<Option<A::Output>> {
    wait_from(
        acquisition,
        wait,
        LeaseInstant::now(),
        Tickets::None,
        (false, false),
        None,
    )
    .await
}

/// Runs `acquisition` until it succeeds, `wait` (counted from `started`,
/// when the caller's call began: one deadline per call) runs out
/// (`Ok(None)`), or an attempt fails for good. `tickets` are channel
/// memberships the caller made already (a lock that joined its client's
/// queue of waiters), `woken` whether a message ended the caller's own
/// first park, `seen_held` whether the call has seen the lock held already
/// (it queued behind a waiter of its client): a wait that runs out from
/// then on ends not acquired, as after a busy answer. `edge`: the wait-for
/// edge the caller's own check wrote ([`check_queued`]).
///
/// A plain function around an `async` block: an `async fn` keeps its
/// arguments twice (as given, and as the locals its body uses), and a
/// parked waiter sits in this future.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments twice in a parked waiter"
)]
pub(crate) fn wait_from<A: Acquisition>(
    acquisition: &mut A,
    wait: Wait,
    started: LeaseInstant,
    mut tickets: Tickets,
    (mut woken, seen_held): (bool, bool),
    edge: Option<Box<WaitEdge>>,
) -> impl Future<Output = Result<Option<A::Output>>> {
    async move {
        let deadline = wait.deadline(started);
        let cut_off = wait.cut_off(started);
        let remaining = |now: LeaseInstant| {
            deadline.map_or(Duration::MAX, |at| at.saturating_duration_since(now))
        };
        let wakes = acquisition.wakes();
        let mut retries = 0;
        // Redis has answered an attempt of this call with "not now": a wait
        // that runs out from then on ends as not acquired (the lock was held
        // when last seen), even with an attempt in flight.
        let mut answered_busy = seen_held;
        // This call's wait was counted (once per call).
        let mut counted = false;
        // This waiter's wait-for edge, once a deadlock check wrote it:
        // deleted when the wait ends. Boxed, for the parked waiter's size.
        let mut edge = edge;
        loop {
            // Per ticket, the subscription generation and messages seen before
            // the attempt: a park returns at once for anything newer.
            tickets.iter_mut().for_each(Ticket::mark);
            if answered_busy && cut_off.is_some_and(|cut| cut.left(LeaseInstant::now()).is_zero()) {
                // The wait ended while parked or pausing: no time for a call.
                remove_edge(&mut edge).await;
                give_up_within_grace(acquisition).await;
                return Ok(None);
            }
            let was_first = acquisition.goes_first();
            // Boxed, as every state but the park is: a parked waiter's future
            // keeps room for its largest state, and the park is the one it
            // sits in (trust::liveness bounds that size; measure 5).
            // What follows is decided in one match and awaited after it: an
            // attempt's outcome or error kept across an await would take room
            // in every state, the park's included.
            let attempt = within(cut_off, "acquire", acquisition.attempt());
            let next = match Box::pin(done_leaves_no_edge(attempt, &mut edge)).await {
                Ok(Step::Done { value, more_left }) => {
                    if more_left {
                        // One message wakes one waiter: let the next one look too.
                        tickets.iter().for_each(Ticket::pass_on);
                    }
                    return Ok(Some(value));
                }
                Ok(Step::Busy { retry_in }) => {
                    retries = 0;
                    answered_busy = true;
                    Next::Park(retry_in)
                }
                Err(error) => {
                    if woken {
                        pass_on(&tickets);
                    }
                    tickets = Tickets::None;
                    if matches!(
                        error,
                        Error::ResponseTimeout {
                            limit: TimeLimit::Wait(_),
                            ..
                        }
                    ) {
                        // The wait ran out with the attempt in flight: it goes
                        // on (and is undone) in the background. Redis that
                        // answered "not now" before is slow, not silent: not
                        // acquired. Else the error names the wait; what
                        // waiting left is withdrawn as the acquisition drops.
                        if !answered_busy {
                            return Err(error);
                        }
                        Next::GiveUp
                    } else {
                        let Some(policy) = acquisition.retry_after(&error) else {
                            return Err(error);
                        };
                        // Retries follow the retry policy: a single try also rides
                        // out a short outage. A bounded wait never sleeps past its
                        // end: a back-off it has no time left for gives up at once.
                        if retries >= policy.attempts {
                            return Err(error);
                        }
                        let delay = policy.delay(retries);
                        if cut_off.is_some_and(|cut| delay >= cut.left(LeaseInstant::now())) {
                            return Err(error);
                        }
                        tracing::debug!(%error, retry = retries, "redlatch: attempt failed, retrying");
                        Next::Retry(delay)
                    }
                }
            };
            let retry_in = match next {
                Next::Park(retry_in) => {
                    let checked =
                        check_deadlock(acquisition, cut_off, deadline, retry_in, &mut edge);
                    match checked.await {
                        Ok(retry_in) => retry_in,
                        Err(refused) => {
                            // Given up already (an await here would keep the
                            // outcome in a parked waiter's room).
                            if woken {
                                pass_on(&tickets);
                            }
                            return Err(refused);
                        }
                    }
                }
                Next::GiveUp => {
                    remove_edge(&mut edge).await;
                    give_up_within_grace(acquisition).await;
                    return Ok(None);
                }
                Next::Retry(delay) => {
                    Box::pin(tokio::time::sleep(delay)).await;
                    retries += 1;
                    woken = false;
                    continue;
                }
            };
            let first = acquisition.goes_first();
            if woken && (wakes == (Wakes::One { pass_on_busy: true }) || (was_first && !first)) {
                // Woken first as a claimant, it lost the claim to a longer
                // waiter, who may be parked here too.
                pass_on(&tickets);
            }
            let now = LeaseInstant::now();
            if deadline.is_some_and(|at| now >= at) {
                remove_edge(&mut edge).await;
                if cut_off.is_some() {
                    give_up_within_grace(acquisition).await;
                } else {
                    Box::pin(acquisition.give_up()).await;
                }
                return Ok(None);
            }
            let limit = rewrite_by(edge.is_some(), retry_in.min(remaining(now)));
            if tickets.is_empty() {
                // Subscribe, then try again: a release between the attempt and
                // the subscription would otherwise go unnoticed. A primitive
                // with nowhere to listen (a spin lock; Redlock with no node
                // reachable) comes back here each round: one contended wait.
                if !counted {
                    crate::engine::metrics::contended_wait();
                    counted = true;
                }
                tickets = Tickets::from(acquisition.join()?);
                if tickets.is_empty() {
                    // Nowhere to listen (no node reachable): wait the re-check out.
                    Box::pin(tokio::time::sleep(limit)).await;
                }
                for ticket in tickets.iter() {
                    ticket.note_lease_end(now + retry_in);
                }
                Box::pin(futures_util::future::join_all(
                    tickets.iter().map(|t| t.subscribed(limit)),
                ))
                .await;
                woken = false;
                // Epoch 1: subscribed once, never since (after a resubscription
                // messages may have been missed: attempt again).
                let fresh = !tickets.is_empty() && tickets.iter().all(|t| t.epoch() == 1);
                // Cut off where the wait ends, as an attempt is (then the loop
                // gives up). Boxed: a parked waiter's future would otherwise keep
                // room for it (trust::liveness bounds that size).
                let looked = match fresh {
                    true => {
                        let look = async { Ok(acquisition.recheck().await) };
                        Box::pin(within(cut_off, "acquire", look))
                            .await
                            .ok()
                            .flatten()
                    }
                    false => None,
                };
                if let Some(retry_in) = looked {
                    let now = LeaseInstant::now();
                    for ticket in tickets.iter() {
                        ticket.note_lease_end(now + retry_in);
                    }
                    let limit = rewrite_by(edge.is_some(), retry_in.min(remaining(now)));
                    for ticket in tickets.iter_mut() {
                        ticket.mark_as(1, 0);
                    }
                    let wake = park_on_any(&tickets, limit, first).await;
                    record_wake(wake);
                    woken = wake == Wake::Message;
                }
            } else {
                for ticket in tickets.iter() {
                    ticket.note_lease_end(now + retry_in);
                }
                let wake = park_on_any(&tickets, limit, first).await;
                record_wake(wake);
                woken = wake == Wake::Message;
            }
            let pause = acquisition.pause_after_wake();
            if !pause.is_zero() {
                Box::pin(tokio::time::sleep(
                    pause.min(remaining(LeaseInstant::now())),
                ))
                .await;
            }
        }
    }
}

/// What the wait loop does after an attempt that did not take the lock.
enum Next {
    /// Park until a wake-up or this long.
    Park(Duration),
    /// The wait ran out: give up.
    GiveUp,
    /// Try again after this back-off.
    Retry(Duration),
}

/// Gives up a bounded wait that ran out: waits [`GIVE_UP_GRACE`] at most
/// for the withdrawal, which goes on in the background past it (withdrawals
/// are run to their end however their caller goes). Boxed: a rare path,
/// whose room a parked waiter would otherwise carry.
async fn give_up_within_grace<A: Acquisition>(acquisition: &mut A) {
    let _ = Box::pin(tokio::time::timeout(GIVE_UP_GRACE, acquisition.give_up())).await;
}

/// After a busy attempt that asks to try again in `retry_in`: the deadlock
/// check of a waiter that takes part ([`Acquisition::waits_for`]), its
/// edge living until its next attempt (or the wait's end, `deadline`) and
/// [`EDGE_MARGIN`]. Gives `retry_in` back, or, when the wait would close a
/// cycle, gives up what waiting held (as [`give_up_within_grace`]) and
/// returns [`Error::Deadlock`]. The check is cut off where the wait ends. Boxed, as every rare state of a
/// parked waiter is, and made in a plain function, `retry_in` moved in and
/// out: kept in the wait loop across the check, each took room in a parked
/// waiter.
fn check_deadlock<'a, A: Acquisition>(
    acquisition: &'a mut A,
    cut_off: Option<Deadline>,
    deadline: Option<LeaseInstant>,
    retry_in: Duration,
    edge: &'a mut Option<Box<WaitEdge>>,
) -> Pin<Box<impl Future<Output = Result<Duration>> + 'a>> {
    Box::pin(async move {
        let left = deadline.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(LeaseInstant::now())
        });
        if left.is_zero() {
            // A single try, or a wait that is over: it gives up next,
            // waiting for nothing, so it closes no cycle.
            return Ok(retry_in);
        }
        let next_in = retry_in.min(left);
        match check_deadlock_now(acquisition, cut_off, next_in, edge).await {
            Some(cycle) => {
                give_up_within_grace(acquisition).await;
                Err(Error::Deadlock { cycle })
            }
            None => Ok(retry_in),
        }
    })
}

/// The deadlock check of a waiter about to park behind a waiter of its
/// own client (a lock's local queue), which makes no attempt first: it
/// waits all the same, so it checks and writes its edge as a busy attempt
/// would. Returns how long it may park (`limit`, cut to
/// [`REWRITE_EVERY`] once it has an edge), or [`Error::Deadlock`] (what
/// waiting held given up). `edge` goes on to [`wait_from`].
pub(crate) async fn check_queued<A: Acquisition>(
    acquisition: &mut A,
    wait: Wait,
    started: LeaseInstant,
    limit: Duration,
    edge: &mut Option<Box<WaitEdge>>,
) -> Result<Duration> {
    let (cut_off, deadline) = (wait.cut_off(started), wait.deadline(started));
    let limit = check_deadlock(acquisition, cut_off, deadline, limit, edge).await?;
    Ok(rewrite_by(edge.is_some(), limit))
}

/// [`check_deadlock`]'s body.
async fn check_deadlock_now<A: Acquisition>(
    acquisition: &A,
    cut_off: Option<Deadline>,
    next_in: Duration,
    edge: &mut Option<Box<WaitEdge>>,
) -> Option<Vec<crate::wait_link::WaitLink>> {
    if edge
        .as_ref()
        .is_some_and(|edge| edge.checked_within(CHECK_EVERY))
    {
        // Checked a moment ago (a waiter that polls): its edge stands.
        return None;
    }
    let check = Check::of(acquisition.waits_for()?)?;
    // Until the next check at the soonest (a park is cut to REWRITE_EVERY
    // while the edge stands), and a margin: MAX_EDGE_LIFE at most.
    let lives = next_in
        .min(REWRITE_EVERY)
        .max(CHECK_EVERY)
        .saturating_add(EDGE_MARGIN);
    let edge_ms = u64::try_from(lives.as_millis()).unwrap_or(u64::MAX);
    let look = async { Ok(check.run(edge_ms, edge).await) };
    let cycle = within(cut_off, "deadlock check", look)
        .await
        .ok()
        .flatten()?;
    crate::engine::metrics::deadlock();
    tracing::debug!(
        cycle = %crate::wait_link::describe(&cycle),
        "redlatch: acquire refused, its wait would close a wait-for cycle"
    );
    Some(cycle)
}

/// `attempt`, and when it acquired, the waiter's wait-for edge deleted
/// before the value is handed over: a party that goes on leaves no edge
/// behind it. Run inside the attempt's box: an await of the wait loop
/// would keep the value in a parked waiter's room.
async fn done_leaves_no_edge<T>(
    attempt: impl Future<Output = Result<Step<T>>>,
    edge: &mut Option<Box<WaitEdge>>,
) -> Result<Step<T>> {
    let step = attempt.await;
    if let Ok(Step::Done { .. }) = &step {
        remove_edge(edge).await;
    }
    step
}

/// Deletes the waiter's wait-for edge, if it wrote one, as its wait ends
/// ([`GIVE_UP_GRACE`] at most; the delete goes on past it).
async fn remove_edge(edge: &mut Option<Box<WaitEdge>>) {
    if let Some(edge) = edge.take() {
        Box::pin(edge.remove(GIVE_UP_GRACE)).await;
    }
}

/// A park of at most `limit`, shortened to [`REWRITE_EVERY`] while the
/// waiter has a wait-for edge: its next attempt checks again and rewrites
/// the edge before it lapses (an edge lives
/// [`MAX_EDGE_LIFE`](crate::deadlock::MAX_EDGE_LIFE) at most).
fn rewrite_by(has_edge: bool, limit: Duration) -> Duration {
    if has_edge {
        limit.min(REWRITE_EVERY)
    } else {
        limit
    }
}

/// Counts how a park ended.
pub(crate) fn record_wake(wake: Wake) {
    crate::engine::metrics::woken(match wake {
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
/// `first`: as the claimant of the lock's next turn. Each ticket parks
/// until a message it has not seen (one that came after its mark's count),
/// a resubscription after its mark's epoch, or `limit` ([`Ticket::mark`]).
///
/// A plain function, not an `async fn`: a parked waiter sits in this
/// future, and each `async fn` layer would add its arguments' room.
fn park_on_any(
    tickets: &[Ticket],
    limit: Duration,
    first: bool,
) -> impl Future<Output = Wake> + '_ {
    match tickets {
        // The usual case, one channel: no boxing.
        [ticket] => Either::Left(ticket.park_from_mark(limit, first)),
        _ => {
            let parked = tickets
                .iter()
                .map(|ticket| Box::pin(ticket.park_from_mark(limit, first)));
            Either::Right(futures_util::future::select_all(parked).map(|(wake, ..)| wake))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_past_the_wait_is_cut_off_naming_the_wait_and_others_are_not() {
        let started = LeaseInstant::now();
        let wait = Duration::from_millis(100);
        let cut = Wait::For(wait).cut_off(started);
        let silent = std::future::pending::<Result<()>>();
        let outcome = within(cut, "acquire", silent).await;
        assert!(started.elapsed() >= wait, "cut off early");
        assert!(
            matches!(
                outcome,
                Err(Error::ResponseTimeout {
                    op: "acquire",
                    limit: TimeLimit::Wait(w),
                }) if w == wait
            ),
            "{outcome:?}"
        );
        // The wait is over: a call made now still gets the floor.
        let answered = within(cut, "acquire", async {
            tokio::time::sleep(ATTEMPT_FLOOR / 2).await;
            Ok(7)
        });
        assert_eq!(answered.await.unwrap(), 7);
        // A single try, a zero wait and an unbounded wait cut nothing off.
        for wait in [Wait::Once, Wait::For(Duration::ZERO), Wait::Forever] {
            assert!(wait.cut_off(started).is_none(), "{wait:?}");
        }
    }

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

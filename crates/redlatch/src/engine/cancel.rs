//! The one hand-over of a script call's outcome to a caller that may have
//! gone away.
//!
//! A call that takes something in Redis (a hold, a permit, a place in line)
//! must never be cut off halfway by the caller dropping its future (an
//! abort, a `select!`, a timeout). It runs in the caller's own task, with no
//! spawn and no hop between threads on the common path; if the caller drops
//! it before it ends, the rest of the call moves to a task of its own, runs
//! to its end there, and its outcome goes to `undo`, which gives back what
//! was taken. An outcome is either returned from the very poll that
//! produced it or undone: there is no gap in between where it could be
//! lost.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::settings::RetryPolicy;
use crate::sync::Spawner;

/// A call that finishes in the background when its caller goes away (see
/// the module's documentation).
struct Finishing<T, U, F>
where
    T: Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    /// The call, until it has answered. Its type is erased here, so that a
    /// future that awaits an acquire stays shallow for the compiler's
    /// auto-trait checks however deep the call's own future is (it is
    /// boxed anyway).
    call: Option<Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>>,
    /// What to do with an outcome nobody received; `None` for calls whose
    /// outcome needs no undo (a release).
    undo: Option<U>,
    /// False until the first poll: a call never started took nothing, and
    /// is simply dropped.
    started: bool,
    /// Where the rest of a dropped call runs: the client's runtime.
    spawner: Spawner,
}

// The call is pinned in its box and `undo` is never pinned: moving the
// wrapper moves neither in place.
impl<T, U, F> Unpin for Finishing<T, U, F>
where
    T: Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
}

impl<T, U, F> Future for Finishing<T, U, F>
where
    T: Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            panic!("a script call polled after it answered");
        };
        this.started = true;
        let outcome = ready!(call.as_mut().poll(cx));
        this.call = None;
        this.undo = None;
        Poll::Ready(outcome)
    }
}

impl<T, U, F> Drop for Finishing<T, U, F>
where
    T: Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    fn drop(&mut self) {
        let Some(call) = self.call.take() else { return };
        if !self.started {
            return;
        }
        let undo = self.undo.take();
        self.spawner.spawn(async move {
            let outcome = call.await;
            if let Some(undo) = undo {
                undo(outcome).await;
            }
        });
    }
}

/// Runs `call` and returns its outcome. If the caller drops the returned
/// future before the call has answered, the call runs to its end in the
/// background, started by `background`, and `undo` gets the outcome nobody took.
///
/// `undo` sees errors too: an anonymous acquire cut off by a broken
/// connection may have taken a hold, and giving it back is safe.
///
/// The call starts at the first poll; a future dropped before it took
/// nothing and undoes nothing. The call is boxed, so a waiting acquire that
/// holds this future stays small.
pub(crate) fn hand_over<T, C, U, F>(
    background: &Spawner,
    call: C,
    undo: U,
) -> impl Future<Output = Result<T>> + Send + 'static
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    finishing(background.clone(), call, undo)
}

/// [`hand_over`] with the rest of a dropped call run by `spawner`.
fn finishing<T, C, U, F>(spawner: Spawner, call: C, undo: U) -> Finishing<T, U, F>
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    Finishing {
        call: Some(Box::pin(call)),
        undo: Some(undo),
        started: false,
        spawner,
    }
}

/// Runs `call` to its end: dropping the returned future stops waiting for
/// the outcome, not the call (releases, which must not be cut off halfway).
pub(crate) async fn run_to_end<T, C>(background: &Spawner, call: C) -> Result<T>
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
{
    let nothing_to_undo = |_: Result<T>| std::future::ready(());
    hand_over(background, call, nothing_to_undo).await
}

/// Starts background clean-up (an undo, the release of a dropped guard)
/// that no caller waits for. If the runtime is shutting down the task never
/// runs, and what it would have given back expires with its lease.
pub(crate) fn spawn_undo<F>(background: &Spawner, undo: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    background.spawn(undo);
}

/// Runs `give_back` until Redis answers it (anything but a transient
/// error), waiting the retry policy's delays in between, or until
/// `deadline`, when what it gives back has run out by itself. A connection
/// cut while the first try was in flight may still be down (with retries
/// off, redis-rs reconnects only on the next use), so one try is not
/// enough. For background undos ([`spawn_undo`], the undo of
/// [`hand_over`]), never on a caller's time; only for give-backs that are
/// harmless to repeat (an anonymous owner has at most one hold).
pub(crate) async fn until_answered<T, F, Fut>(
    op: &'static str,
    retry: RetryPolicy,
    deadline: LeaseInstant,
    mut give_back: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match give_back().await {
            Err(error) if error.is_transient() => {
                let delay = retry.delay(tries);
                if LeaseInstant::now() + delay >= deadline {
                    tracing::debug!(%error, op, "redlatch: giving up an undo; what it would give back expires");
                    return;
                }
                tracing::debug!(%error, op, tries, "redlatch: an undo failed; trying again");
                tokio::time::sleep(delay).await;
                tries += 1;
            }
            _ => return,
        }
    }
}

// On a tokio runtime: not built for the permutation checks, whose spawner is shuttle's.
#[cfg(all(test, not(feature = "__permutation-checks")))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Counts undos; the call "takes" one unit each time it succeeds.
    async fn cancelled_at(delay: Duration, call_takes: Duration) -> (usize, usize) {
        let taken = Arc::new(AtomicUsize::new(0));
        let undone = Arc::new(AtomicUsize::new(0));
        let (t, u) = (taken.clone(), undone.clone());
        let background = Spawner::new(&tokio::runtime::Handle::current());
        let caller = tokio::spawn(async move {
            let call = async move {
                tokio::time::sleep(call_takes).await;
                t.fetch_add(1, Ordering::SeqCst);
                Ok(())
            };
            let undo = move |outcome: Result<()>| async move {
                if outcome.is_ok() {
                    u.fetch_add(1, Ordering::SeqCst);
                }
            };
            hand_over(&background, call, undo).await
        });
        tokio::time::sleep(delay).await;
        caller.abort();
        let delivered = matches!(caller.await, Ok(Ok(())));
        tokio::time::sleep(call_takes * 2 + Duration::from_millis(20)).await;
        let taken = taken.load(Ordering::SeqCst);
        let undone = undone.load(Ordering::SeqCst);
        (taken - undone, usize::from(delivered))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_outcome_no_caller_received_is_always_undone() {
        for round in 0..200u64 {
            // Abort at every moment around the call's completion.
            let delay = Duration::from_micros(900 + (round % 40) * 5);
            let (kept, delivered) = cancelled_at(delay, Duration::from_millis(1)).await;
            assert_eq!(
                kept, delivered,
                "round {round}: kept {kept}, delivered {delivered}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_claimed_outcome_is_not_undone() {
        let (kept, delivered) = cancelled_at(Duration::from_millis(50), Duration::ZERO).await;
        assert_eq!((kept, delivered), (1, 1));
    }
}

/// Every interleaving of a call, its caller dropped at any point, and the
/// background task that finishes it (docs/TESTING.md, "Permutation checks").
#[cfg(all(test, feature = "__permutation-checks"))]
mod permutation_checks {
    use std::sync::Arc;

    use shuttle::future::{block_on, spawn, yield_now};

    use super::*;
    use crate::error::Error;
    use crate::sync::permutations::{eventually, explore};
    use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering};

    /// What became of one call's outcome.
    #[derive(Default)]
    struct Fate {
        started: AtomicBool,
        answered: AtomicBool,
        delivered: AtomicUsize,
        undone: Mutex<Vec<Result<u32>>>,
    }

    /// Caller `id`'s call: two scheduling points, then an outcome (odd
    /// calls fail, which `undo` must see too).
    fn call(id: u32, fate: &Arc<Fate>) -> impl Future<Output = Result<u32>> + Send + 'static {
        let fate = fate.clone();
        async move {
            fate.started.store(true, Ordering::SeqCst);
            yield_now().await;
            yield_now().await;
            fate.answered.store(true, Ordering::SeqCst);
            if id.is_multiple_of(2) {
                Ok(id)
            } else {
                Err(Error::ResponseTimeout {
                    op: "fake call",
                    limit: crate::error::TimeLimit::Response,
                })
            }
        }
    }

    /// Three callers, each aborted after a different number of the
    /// schedule's steps (the last never): every outcome that was produced
    /// is delivered to its caller or given to `undo`, exactly once.
    fn outcomes_are_delivered_or_undone_exactly_once() {
        block_on(async {
            let fates: Vec<Arc<Fate>> = (0..3).map(|_| Arc::default()).collect();
            let callers: Vec<_> = fates
                .iter()
                .enumerate()
                .map(|(id, fate)| {
                    let id = id as u32;
                    let (call, undone) = (call(id, fate), fate.clone());
                    let undo = move |outcome: Result<u32>| async move {
                        undone.undone.lock().push(outcome);
                    };
                    let delivered = fate.clone();
                    let handed_over = finishing(Spawner::for_checks(), call, undo);
                    spawn(async move {
                        let outcome = handed_over.await;
                        delivered.delivered.fetch_add(1, Ordering::SeqCst);
                        outcome
                    })
                })
                .collect();
            for (aborted_after, caller) in callers.iter().enumerate().take(2) {
                for _ in 0..aborted_after {
                    yield_now().await;
                }
                caller.abort();
            }
            for (id, (caller, fate)) in callers.into_iter().zip(&fates).enumerate() {
                let returned = caller.await;
                if let Ok(outcome) = &returned {
                    assert_eq!(
                        outcome.is_ok(),
                        id.is_multiple_of(2),
                        "caller {id} got another's outcome"
                    );
                }
                // A call that started runs to its end, here or in the background.
                let settled = eventually(100, || {
                    let started = fate.started.load(Ordering::SeqCst);
                    let handled = fate.delivered.load(Ordering::SeqCst) + fate.undone.lock().len();
                    !started || (fate.answered.load(Ordering::SeqCst) && handled > 0)
                })
                .await;
                assert!(
                    settled,
                    "caller {id}: an outcome was neither delivered nor undone"
                );
                let delivered = fate.delivered.load(Ordering::SeqCst);
                let undone = fate.undone.lock().len();
                let answered = fate.answered.load(Ordering::SeqCst);
                assert_eq!(
                    delivered + undone,
                    usize::from(answered),
                    "caller {id}: delivered {delivered}, undone {undone}, answered {answered}"
                );
                assert_eq!(returned.is_ok(), delivered == 1, "caller {id}");
            }
        });
    }

    #[test]
    fn permutation_a_dropped_callers_outcome_is_undone_and_a_delivered_one_never() {
        explore(outcomes_are_delivered_or_undone_exactly_once);
    }
}

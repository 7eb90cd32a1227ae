//! The one hand-over of a script call's result to a caller that may have
//! gone away.
//!
//! A call that takes something in Redis (a hold, a permit, a place in line)
//! runs in a task of its own, so that dropping the caller's future never cuts
//! the call off halfway. Its outcome travels back wrapped in a [`Claim`]: a
//! value whose `Drop` gives back what was taken unless the caller claimed it.
//! Whether the caller is gone before the reply is sent, after it is sent but
//! before it is read, or the runtime shuts down in between, the claim is
//! dropped unclaimed and the undo runs: a result no one receives is always
//! given back. (Checking whether `send` failed, as one might, misses the
//! second case: the value sits in the channel and is dropped with it.)

use std::future::Future;
use std::pin::Pin;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::settings::RetryPolicy;

type Undo<T> = Box<dyn FnOnce(T) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// An outcome that undoes itself when dropped unclaimed.
pub(crate) struct Claim<T: Send + 'static> {
    value: Option<T>,
    undo: Option<Undo<T>>,
    runtime: Handle,
}

impl<T: Send + 'static> Claim<T> {
    /// Wraps `value`; dropping the claim unclaimed runs `undo(value)` on `runtime`.
    pub(crate) fn new<U, F>(value: T, runtime: Handle, undo: U) -> Claim<T>
    where
        U: FnOnce(T) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        Claim {
            value: Some(value),
            undo: Some(Box::new(move |value| Box::pin(undo(value)))),
            runtime,
        }
    }

    /// Takes the value: the caller now owns what it stands for.
    pub(crate) fn claim(mut self) -> T {
        self.undo = None;
        self.value
            .take()
            .expect("a claim holds its value until claimed")
    }
}

impl<T: Send + 'static> Drop for Claim<T> {
    fn drop(&mut self) {
        if let (Some(value), Some(undo)) = (self.value.take(), self.undo.take()) {
            spawn_undo(&self.runtime, undo(value));
        }
    }
}

/// Runs `call` in a task of its own on `runtime` and returns its outcome. If
/// the caller drops the returned future at any point, `undo` gets the outcome
/// nobody took, and its future runs in the background.
///
/// `undo` sees errors too: an anonymous acquire cut off by a broken
/// connection may have taken a hold, and giving it back is safe.
///
/// The task starts at once, not at the first poll: the returned future then
/// holds only the reply's receiver, so a waiting acquire stays small.
pub(crate) fn hand_over<T, C, U, F>(
    runtime: &Handle,
    op: &'static str,
    call: C,
    undo: U,
) -> impl Future<Output = Result<T>> + Send + 'static
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(Result<T>) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let (reply_to, reply) = oneshot::channel();
    let task_runtime = runtime.clone();
    runtime.spawn(async move {
        let outcome = call.await;
        // A failed send hands the claim back, and dropping it runs the undo.
        let _ = reply_to.send(Claim::new(outcome, task_runtime, undo));
    });
    async move {
        match reply.await {
            Ok(claim) => claim.claim(),
            Err(_) => Err(runtime_gone(op)),
        }
    }
}

/// Runs `call` to its end in a task of its own: dropping the returned future
/// stops waiting for the outcome, not the call (releases, which must not be
/// cut off halfway).
pub(crate) async fn run_to_end<T, C>(runtime: &Handle, op: &'static str, call: C) -> Result<T>
where
    T: Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
{
    runtime.spawn(call).await.map_err(|_| runtime_gone(op))?
}

/// Starts background clean-up (an undo, the release of a dropped guard)
/// that no caller waits for. If the runtime is shutting down the task never
/// runs, and what it would have given back expires with its lease.
pub(crate) fn spawn_undo<F>(runtime: &Handle, undo: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    drop(runtime.spawn(undo));
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

fn runtime_gone(op: &'static str) -> Error {
    Error::Protocol {
        op,
        detail: "the runtime shut down during the call".to_owned(),
    }
}

#[cfg(test)]
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
        let runtime = Handle::current();
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
            hand_over(&runtime, "test", call, undo).await
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

//! One acquire attempt of any primitive, and the one policy that undoes it:
//! dropping the caller's future never cuts the script call off halfway; the
//! call then runs to its end in the background and gives back what it took
//! ([`crate::engine::cancel::hand_over`]).
//!
//! The policy, for every primitive:
//! - an attempt nobody waits for any more withdraws what waiting left (a
//!   place, a claim) and gives back a hold it took;
//! - an attempt whose outcome is unknown (a broken connection) is undone
//!   when its owner is anonymous, hence unique to it, so giving back
//!   whatever it may hold is always safe; a named owner's is left alone (it
//!   may hold the lock through another guard);
//! - a named owner's hold is given back once (it may be a re-entry); an
//!   anonymous owner's is retried until Redis answers or its lease is over.

use std::future::Future;
use std::time::Duration;

use tracing::debug;

use crate::engine::cancel::{hand_over, spawn_undo, until_answered};
use crate::engine::context::Core;
use crate::engine::primitive::AttemptCall;
use crate::error::Result;
use crate::lease_clock::LeaseInstant;
use crate::settings::RetryPolicy;
use crate::transport::Connection;

/// One attempt of `call`. One round trip, usually.
///
/// If the caller drops the returned future, the attempt still completes and
/// is undone. The call is boxed, so the future stays small while a waiter
/// holds it.
pub(crate) fn attempt<A: AttemptCall>(
    core: &Core,
    call: A,
) -> impl Future<Output = Result<A::Reply>> + Send + 'static {
    let settings = core.current_settings();
    let undo = Undo {
        conn: core.conn.clone(),
        limit: settings.response_timeout,
        retry: settings.retry,
    };
    let background = core.background.clone();
    let send = call.send(core, LeaseInstant::now());
    let sending = {
        let (call, undo) = (call.clone(), undo.clone());
        async move {
            let outcome = send.await;
            if matches!(&outcome, Err(error) if error.is_transient()) && !call.named() {
                // The connection may still be down: keep trying in the
                // background until Redis answers or the lease ends.
                debug!(lock = %call.key(), "redlatch: undoing an acquire attempt of unknown outcome");
                spawn_undo(&background, undo.run(call, true));
            }
            outcome
        }
    };
    let abandoned = move |outcome: Result<A::Reply>| async move {
        debug!(lock = %call.key(), "redlatch: undoing an abandoned acquire attempt");
        // An uncertain outcome of an anonymous owner is being undone
        // already (above); withdrawing twice is harmless.
        let took_hold = matches!(&outcome, Ok(reply) if A::took_hold(reply));
        undo.run(call, took_hold).await;
    };
    hand_over(&core.background, sending, abandoned)
}

/// What an undo sends with.
#[derive(Clone)]
struct Undo {
    conn: Connection,
    limit: Duration,
    retry: RetryPolicy,
}

impl Undo {
    /// Withdraws what `call` left and, when `release`, gives back its hold.
    async fn run<A: AttemptCall>(self, call: A, release: bool) {
        call.withdraw(self.conn.clone(), self.limit).await;
        if !release {
            return;
        }
        if call.named() {
            // Maybe a re-entry: one release, never repeated.
            let _ = call.release(self.conn, self.limit).await;
            return;
        }
        // An anonymous owner holds once at most: keep trying while the
        // connection is down, until the lease would have run out anyway.
        let deadline = LeaseInstant::now() + Duration::from_millis(call.lease_ms());
        let (conn, limit) = (self.conn, self.limit);
        until_answered("acquire undo", self.retry, deadline, || {
            let (call, conn) = (call.clone(), conn.clone());
            async move { call.release(conn, limit).await }
        })
        .await;
    }
}

//! The lock model's properties, each named after the sentence of
//! docs/SAFETY.md it checks.

use stateright::Property;

use super::LockModel;
use super::state::{LockState, Phase};

/// The property names: the sentences of docs/SAFETY.md they check.
pub mod names {
    /// "The promise", with its provisos (a) and (b).
    pub const EXCLUSIVE: &str =
        "while a guard's is_held() is true, no other owner holds the lock (no pause, no failover)";
    /// The same, on paths where a script re-sent after NOSCRIPT ran after
    /// later requests (docs/SAFETY.md, the engine's invariant (a)).
    pub const EXCLUSIVE_REORDERED: &str = "whatever order Redis ran the requests in, while is_held() is true no other owner holds the lock";
    /// The same without the failover proviso: not promised, a known failure.
    pub const EXCLUSIVE_ACROSS_FAILOVER: &str =
        "no other owner holds the lock even across a failover (not promised)";
    /// "The promise", on fencing, as the model's store checks it.
    pub const FENCED: &str =
        "with pauses, a fenced resource never accepts an older token after a newer one";
    /// The lab's S promise for a fenced lock under pauses.
    pub const NO_STALE_WRITE: &str =
        "no write is accepted from a holder whose lock was taken by another since";
    /// "The promise": tokens.
    pub const TOKENS_INCREASE: &str = "guard.token() is strictly increasing per lock name";
    /// "Fencing tokens": the shared counter, its loss, restarts and
    /// failovers with `wait_for_replicas` (issue 36).
    pub const TOKENS_NEVER_GO_BACK: &str = "the tokens of a name's acquisitions never go back, \
         across other names' tokens, a lost counter, an empty restart and a failover with \
         wait_for_replicas";
    /// Faults: subscription killed; liveness.
    pub const WAKES: &str = "a released lock wakes a waiter: no waiter waits past the lease";
    /// "Wake-ups": a release skips the unlock message only when nobody it
    /// turned away waits for it (issue 36).
    pub const NO_LOST_WAKEUP: &str = "a last release publishes the unlock message whenever a \
         waiter its hold answered busy still waits for it";
    /// Faults: acquire cancelled at any moment.
    pub const NOTHING_LEFT: &str = "a hold nobody received is released, never left to its lease";
    /// Faults: connection lost while a call is in flight, Redis Cluster.
    pub const RUNS_ONCE: &str =
        "a re-send returns the reply of the run that took effect and nothing runs twice";
    /// The engine's invariant (b).
    pub const NEVER_SHORTEN: &str = "no script takes back time another request set";
    /// The engine's invariant (a).
    pub const BELIEF_SOUND: &str = "a guard never reports is_held() after Redis dropped its hold";
}

impl LockModel {
    pub(super) fn lock_properties(&self) -> Vec<Property<LockModel>> {
        vec![
            Property::always(names::EXCLUSIVE, |_, s: &LockState| {
                s.history.paused || s.history.failed_over || believers(s) <= 1
            }),
            Property::always(names::EXCLUSIVE_REORDERED, |_, s: &LockState| {
                !s.history.reordered
                    || s.history.paused
                    || s.history.failed_over
                    || believers(s) <= 1
            }),
            Property::always(names::EXCLUSIVE_ACROSS_FAILOVER, |_, s: &LockState| {
                s.history.paused || believers(s) <= 1
            }),
            Property::always(names::FENCED, |model: &LockModel, s: &LockState| {
                !model.config.fenced || s.history.failed_over || !s.store.older_accepted
            }),
            Property::always(names::NO_STALE_WRITE, |model: &LockModel, s: &LockState| {
                !model.config.fenced || s.history.failed_over || !s.store.stale_accepted
            }),
            Property::always(names::TOKENS_INCREASE, |_, s: &LockState| {
                s.history.failed_over || !s.history.token_went_back
            }),
            Property::always(names::TOKENS_NEVER_GO_BACK, |_, s: &LockState| {
                s.history.unacknowledged_failover || !s.history.received_token_went_back
            }),
            Property::eventually(names::WAKES, |_, s: &LockState| {
                s.clients
                    .iter()
                    .all(|c| matches!(c.phase, Phase::Done | Phase::Cancelled))
            }),
            Property::always(names::NO_LOST_WAKEUP, |_, s: &LockState| {
                !s.history.lost_wakeup
            }),
            Property::always(names::NOTHING_LEFT, |_, s: &LockState| {
                s.history.failed_over || nothing_left(s)
            }),
            Property::always(names::RUNS_ONCE, |_, s: &LockState| !s.history.ran_twice),
            Property::always(names::NEVER_SHORTEN, |_, s: &LockState| {
                !s.history.shortened
            }),
            Property::always(names::BELIEF_SOUND, |_, s: &LockState| {
                s.history.failed_over || belief_sound(s)
            }),
        ]
    }
}

/// Clients that believe they hold the lock: `is_held()` is true, or they
/// checked it and are about to write.
pub(super) fn believers(state: &LockState) -> usize {
    state
        .clients
        .iter()
        .filter(|c| c.phase == Phase::Holding && (state.now < c.believed_until || c.read.is_some()))
        .count()
}

/// Every holder whose `is_held()` is true has its hold on the master, with
/// a lease that outlasts the belief.
pub(super) fn belief_sound(state: &LockState) -> bool {
    state.clients.iter().enumerate().all(|(c, client)| {
        let believes = client.phase == Phase::Holding && state.now < client.believed_until;
        !believes
            || state.master.hold.as_ref().is_some_and(|hold| {
                usize::from(hold.owner) == c && hold.deadline >= client.believed_until
            })
    })
}

/// A cancelled client whose attempt has settled (nothing of it in flight)
/// has no hold on the master.
fn nothing_left(state: &LockState) -> bool {
    state.clients.iter().enumerate().all(|(c, client)| {
        let c = c as u8;
        let settled = !state.requests.iter().any(|r| r.client == c)
            && !state.answers.iter().any(|a| a.request.client == c);
        client.phase != Phase::Cancelled
            || !settled
            || state
                .master
                .hold
                .as_ref()
                .is_none_or(|hold| hold.owner != c)
    })
}

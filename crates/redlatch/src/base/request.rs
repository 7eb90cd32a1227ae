//! `Request`: who asks for a lock, and for how long; what every lock
//! kind's scripts and guards are handed.

use std::sync::Arc;

use crate::base::keys::LockKeys;
use crate::engine::acquire::Terms;

/// Who asks for the lock, and for how long.
#[derive(Clone)]
pub(crate) struct Request {
    pub(crate) keys: LockKeys,
    pub(crate) owner: Arc<str>,
    /// True when the caller named the owner; anonymous owners are unique per
    /// acquisition, which makes undoing an uncertain acquire safe.
    pub(crate) named_owner: bool,
    pub(crate) lease_ms: u64,
    /// How long this owner has waited, in ms, once that is long enough to
    /// claim the reentrant lock's next turn (its `PRECEDENCE_AFTER`); 0
    /// otherwise.
    pub(crate) waited_ms: u64,
    /// A release publishes the unlock message even when no waiter marked
    /// the hold (`release.lua`): for waiters that do not mark (Redisson's,
    /// or this client's own, queued behind one of its waiters).
    pub(crate) wake_always: bool,
}

impl Request {
    /// The request of one acquire of the lock `keys` on `terms`.
    pub(crate) fn of(keys: LockKeys, terms: &Terms) -> Request {
        Request {
            keys,
            owner: terms.owner.clone(),
            named_owner: terms.named,
            lease_ms: terms.lease_ms,
            waited_ms: 0,
            wake_always: false,
        }
    }
}

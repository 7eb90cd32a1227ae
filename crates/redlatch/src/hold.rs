//! One owner's hold on one lock: what its guards and the watchdog share.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::keys::LockKeys;
use crate::lease;

/// The shared state of a held lock. Re-entered guards of the same owner share
/// one `Hold`; the watchdog renews it and marks it lost.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) keys: Arc<LockKeys>,
    /// The hash field: `<client-uuid>:<owner>`.
    pub(crate) owner: Arc<str>,
    pub(crate) lease_ms: u64,
    /// Renewed by the watchdog (true) or a fixed lease that runs out (false).
    pub(crate) renewed: bool,
    pub(crate) token: u64,
    /// True when the owner was named by the caller (not unique to one acquire).
    pub(crate) named_owner: bool,
    lost: CancellationToken,
    /// Monotonic reference for `valid_until_ns`.
    base: Instant,
    /// Until when the lock can be trusted, in ns after `base`.
    valid_until_ns: AtomicU64,
}

impl Hold {
    pub(crate) fn new(
        keys: Arc<LockKeys>,
        owner: Arc<str>,
        lease_ms: u64,
        renewed: bool,
        token: u64,
        named_owner: bool,
        sent_at: Instant,
    ) -> Hold {
        let hold = Hold {
            keys,
            owner,
            lease_ms,
            renewed,
            token,
            named_owner,
            lost: CancellationToken::new(),
            base: sent_at,
            valid_until_ns: AtomicU64::new(0),
        };
        hold.extend_from(sent_at);
        hold
    }

    /// Records a successful acquire or renewal whose request left at `sent_at`.
    pub(crate) fn extend_from(&self, sent_at: Instant) {
        let until = sent_at + lease::validity(self.lease_ms);
        let ns = until.saturating_duration_since(self.base).as_nanos() as u64;
        self.valid_until_ns.fetch_max(ns, Ordering::AcqRel);
    }

    /// Until when the lock can be trusted (monotonic clock).
    pub(crate) fn valid_until(&self) -> Instant {
        self.base + Duration::from_nanos(self.valid_until_ns.load(Ordering::Acquire))
    }

    /// True while not marked lost and the lease has not run out.
    pub(crate) fn is_held(&self) -> bool {
        !self.lost.is_cancelled() && Instant::now() < self.valid_until()
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.cancel();
    }

    pub(crate) fn is_marked_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    pub(crate) fn lost_token(&self) -> &CancellationToken {
        &self.lost
    }
}

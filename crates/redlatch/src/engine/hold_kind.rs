//! How the watchdog renews a hold: a batched script of the hold's primitive
//! ([`BatchRenewal`]), or a hold that renews itself ([`RenewNow`]). Holds and
//! the watchdog read these; they name no client state, so they sit below both.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Weak};

use crate::scripts::{Invocation, Lua};

/// One command per hold that renews it without a script (a string lock's
/// `SET key owner IFEQ owner PX lease`), added to the batch's pipeline. Its
/// reply reads as renewed unless it is nil (the key no longer holds the
/// owner) or a `WRONGTYPE` error (the key is not a lock any more): gone.
pub(crate) type NativeRenewal = fn(&mut redis::Pipeline, key: &str, owner: &str, lease_ms: u64);

/// How the watchdog renews holds of one kind: many holds per call of one
/// script. Every renewal script takes KEYS\[i\] and its own arguments per
/// hold, and answers 1 (renewed) or 0 (gone) per hold, in order; or, where
/// the server can renew without a script, one command per hold in one
/// pipeline ([`NativeRenewal`]).
pub(crate) struct BatchRenewal {
    /// Names the kind in logs and spans.
    pub(crate) name: &'static str,
    pub(crate) script: &'static LazyLock<Lua>,
    /// Adds one hold (its key, its owner field or member, the lease) to a call.
    pub(crate) add_hold: fn(&mut Invocation, key: &str, owner: &str, lease_ms: u64),
    /// A hold on a lock, not a permit: counted by `Client::held_locks`,
    /// marked lost by a force-unlock, counted by the lost-locks metric.
    pub(crate) is_lock: bool,
    /// Renews by one plain command per hold instead of the script.
    pub(crate) native: Option<NativeRenewal>,
    /// The key is a string whose value is the owner (a token lock), not a
    /// hash with an owner field: the loss watch reads it with `GET`.
    pub(crate) string_value: bool,
    /// Renewals keep the lease the hold was taken with rather than follow
    /// the live default lease: a renewal that sets the lease outright (a
    /// plain `SET … PX`, which cannot compare it with the key's PTTL)
    /// cannot then shorten it, whatever order Redis runs renewals in.
    pub(crate) keeps_lease: bool,
}

impl std::fmt::Debug for BatchRenewal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// How the watchdog renews a hold: with a batched script of the hold's
/// primitive, or by calling the hold back.
#[derive(Clone)]
pub(crate) enum HoldKind {
    /// Many holds per call of one script (a lock hash field, a read hold, a
    /// permit): the primitive says which.
    Batched(&'static BatchRenewal),
    /// A hold that renews itself when asked (a Redlock hold, on a majority
    /// of nodes); it keeps its own lease rather than the default one.
    Callback(Weak<dyn RenewNow>),
}

impl std::fmt::Debug for HoldKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HoldKind::Batched(renewal) => renewal.fmt(f),
            HoldKind::Callback(_) => f.write_str("callback"),
        }
    }
}

/// A hold's [`HoldKind`] as the hold keeps it: one word, not two (every
/// held lock has one). A hold that renews itself keeps [`CALLBACK`]; the
/// watchdog keeps its callback beside its entry (`engine/schedule.rs`).
#[derive(Clone, Copy)]
pub(crate) struct KindOfHold(&'static BatchRenewal);

/// What a hold that renews itself keeps as its kind: no script of its own
/// (its callback renews it), its own lease, a hold on a lock (Redlock's)
/// that is not a single server's.
pub(crate) static CALLBACK: BatchRenewal = BatchRenewal {
    name: "callback",
    script: &NO_SCRIPT,
    add_hold: |_, _, _, _| {},
    is_lock: false,
    native: None,
    string_value: false,
    keeps_lease: true,
};

/// [`CALLBACK`]'s script, never sent: a callback renews its hold.
static NO_SCRIPT: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "callback".to_owned(),
        "",
        "return redis.error_reply('a hold that renews itself has no script')".to_owned(),
        &[],
    )
});

impl KindOfHold {
    /// The kind `kind` is; its callback, if it has one, is the caller's to keep.
    pub(crate) fn of(kind: &HoldKind) -> KindOfHold {
        match kind {
            HoldKind::Batched(renewal) => KindOfHold(renewal),
            HoldKind::Callback(_) => KindOfHold(&CALLBACK),
        }
    }

    /// The hold renews itself (a callback).
    pub(crate) fn is_callback(self) -> bool {
        std::ptr::eq(self.0, &CALLBACK)
    }

    /// The batched renewal, unless the hold renews itself.
    pub(crate) fn batched(self) -> Option<&'static BatchRenewal> {
        (!self.is_callback()).then_some(self.0)
    }

    /// True for holds on a single server's lock (what `Client::held_locks`
    /// counts and a force-unlock marks lost).
    pub(crate) fn is_lock(self) -> bool {
        self.0.is_lock
    }

    /// True when renewals set the client's live default lease.
    pub(crate) fn follows_default_lease(self) -> bool {
        !self.0.keeps_lease
    }

    /// True for a hold whose key's value is its owner (a token lock).
    pub(crate) fn string_value(self) -> bool {
        self.0.string_value
    }

    /// True for a hold on a lock of any kind, Redlock's included (not a
    /// permit): what the lost-locks metric counts.
    pub(crate) fn counts_as_lock(self) -> bool {
        self.0.is_lock || self.is_callback()
    }

    /// The same renewal: holds of one kind share one script call.
    pub(crate) fn same_batch(self, other: KindOfHold) -> bool {
        !self.is_callback() && std::ptr::eq(self.0, other.0)
    }
}

impl std::fmt::Debug for KindOfHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

/// What a renewal by callback found.
#[derive(Debug)]
pub(crate) enum Renewed {
    /// Renewed with the lease asked for, within the validity (the callback
    /// has confirmed the hold).
    Yes,
    /// Gone: no renewal can succeed any more.
    Gone,
    /// Did not count this time (timeouts, too few answers); retried.
    Failed(String),
}

/// A hold the watchdog cannot renew with a batched script: it renews itself.
pub(crate) trait RenewNow: Send + Sync {
    /// Renews the hold once, now, with a lease of `lease_ms`.
    fn renew_now(self: Arc<Self>, lease_ms: u64) -> Pin<Box<dyn Future<Output = Renewed> + Send>>;
}

// The engine's own tests renew with a lock hash field's script, declared
// here: the engine names no primitive.
#[cfg(test)]
crate::scripts::script!(
    TEST_RENEW,
    "base/renew.lua",
    crate::scripts::GIVES_BACK,
    lease
);

/// A renewal for the engine's own tests: the lock hash field's script.
#[cfg(test)]
pub(crate) static TEST_RENEWAL: BatchRenewal = BatchRenewal {
    name: "test",
    script: &TEST_RENEW,
    add_hold: |invocation, key, owner, lease_ms| {
        invocation.key(key).arg(owner).arg(lease_ms);
    },
    is_lock: true,
    native: None,
    string_value: false,
    keeps_lease: false,
};

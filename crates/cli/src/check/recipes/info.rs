//! What the lab knows of a recipe before running it: its facts, and what
//! it promises under each fault.

use serde::Serialize;

use crate::check::fault::Fault;
use crate::check::points::Point;

/// What a recipe promises under a fault; each `true` must hold in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Promise {
    /// No two workers believe they hold the lock at once.
    pub exclusive: bool,
    /// No accepted write overwrites one the writer did not read.
    pub no_lost_updates: bool,
    /// No write is accepted from a holder whose lock was taken by another since.
    pub no_stale_writes: bool,
    /// Someone acquires again within a bounded time (see the checker).
    pub live: bool,
}

impl Promise {
    /// Nothing promised.
    pub const NOTHING: Promise = Promise {
        exclusive: false,
        no_lost_updates: false,
        no_stale_writes: false,
        live: false,
    };
    /// Everything promised.
    pub const EVERYTHING: Promise = Promise {
        exclusive: true,
        no_lost_updates: true,
        no_stale_writes: true,
        live: true,
    };
    /// Only liveness promised.
    pub const LIVE: Promise = Promise {
        live: true,
        ..Promise::NOTHING
    };
}

/// A fenced recipe's promise under `fault`, from its `unfenced` twin's:
/// under a client pause two workers may still believe they hold the lock,
/// but the store refuses the one that was overtaken.
pub fn fenced(fault: Fault, unfenced: fn(Fault) -> Promise) -> Promise {
    match fault {
        Fault::PauseClient => Promise {
            no_lost_updates: true,
            no_stale_writes: true,
            ..Promise::LIVE
        },
        other => unfenced(other),
    }
}

/// Facts about a recipe the lab needs before running it.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// The store checks fencing tokens for this recipe's writes.
    pub fenced: bool,
    /// Where a pause hurts this recipe most.
    pub pause_point: Point,
    /// Whether the recipe has a step of two commands (`crash-between` applies).
    pub has_between: bool,
    /// Whether the recipe uses Lua scripts or pub/sub (`flush-scripts` and
    /// `kill-subscribers` apply).
    pub uses_scripts: bool,
    /// What it promises under each fault.
    pub promises: fn(Fault) -> Promise,
    /// How many lock servers it uses (faults hit the first).
    pub servers: usize,
    /// Whether it can run on a Sentinel group (`failover` applies).
    pub sentinel: bool,
    /// Whether it needs replicas (runs under `failover` only).
    pub replicas_only: bool,
}

impl Info {
    /// A recipe on one lock server that promises nothing, pauses worst
    /// before its write, and has neither scripts nor a step of two
    /// commands: each recipe says how it differs.
    pub const PLAIN: Info = Info {
        fenced: false,
        pause_point: Point::BeforeWrite,
        has_between: false,
        uses_scripts: false,
        promises: |_| Promise::NOTHING,
        servers: 1,
        sentinel: false,
        replicas_only: false,
    };
}

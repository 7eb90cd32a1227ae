//! How an order is placed: seed 004's evolution, one strategy per file.
//!
//! | strategy | file | seed | stock never oversold | one order per user |
//! |---|---|---|---|---|
//! | `naive` | [`naive`] | §1 | no | no |
//! | `optimistic-version` | [`optimistic_version`] | §2 (version column) | yes, but refuses buyers while stock is left | yes (as a side effect) |
//! | `optimistic-compare` | [`optimistic_compare`] | §2.1, plan 1 (`stock = ?`) | yes, but refuses buyers while stock is left | yes (as a side effect) |
//! | `optimistic` | [`optimistic`] | §2.1, plan 2 (`stock > 0`) | yes | no |
//! | `local-lock` | [`local_lock`] | §3 | yes | on one instance only |
//! | `early-release` | [`early_release`] | §3 (lock released before the commit) | yes | no |
//! | `redis-lock` | [`redis_lock`] | §4 | yes | yes, across instances |
//! | `reserve` | [`reserve`] | (Redis + stream) | yes | yes, across instances |
//!
//! "no" shows in the data only with the lab schema (`--lab`, no constraints):
//! with the normal schema the database refuses the bad write and the request
//! gets 409 or 410 instead. Every strategy checks the sale window first. The
//! two optimistic-lock strategies answer 409 `conflict`
//! ([`OrderError::Conflict`]) when another buyer's write got in between their
//! read and their write while stock is left.

mod contract;
pub mod early_release;
pub mod local_lock;
pub mod naive;
pub mod optimistic;
pub mod optimistic_compare;
pub mod optimistic_version;
pub mod redis_lock;
pub mod reserve;
mod user_lock;

use std::fmt;

pub use contract::{OrderContext, OrderError, OrderId, Strategy};

/// The strategy a service instance uses to place orders.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    /// Read the stock, then decrement it unconditionally: oversells.
    Naive,
    /// Read stock and version, decrement `WHERE version = ?` (the version
    /// read): never oversells, but refuses buyers while stock is left.
    OptimisticVersion,
    /// Read the stock, decrement `WHERE stock = ?` (the value read): never
    /// oversells, but refuses buyers while stock is left.
    OptimisticCompare,
    /// Decrement only `WHERE stock > 0`; no per-user exclusion.
    Optimistic,
    /// A per-user mutex inside one process: fails across instances.
    LocalLock,
    /// The per-user redlatch lock, released before the transaction
    /// commits: a user's next click slips into the gap.
    EarlyRelease,
    /// A per-user redlatch lock: correct across instances.
    RedisLock,
    /// An atomic Redis reservation; the database is written asynchronously.
    Reserve,
}

impl StrategyKind {
    /// Every strategy, from the seed's first attempt to the last.
    pub const ALL: [StrategyKind; 8] = [
        StrategyKind::Naive,
        StrategyKind::OptimisticVersion,
        StrategyKind::OptimisticCompare,
        StrategyKind::Optimistic,
        StrategyKind::LocalLock,
        StrategyKind::EarlyRelease,
        StrategyKind::RedisLock,
        StrategyKind::Reserve,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Naive => "naive",
            StrategyKind::OptimisticVersion => "optimistic-version",
            StrategyKind::OptimisticCompare => "optimistic-compare",
            StrategyKind::Optimistic => "optimistic",
            StrategyKind::LocalLock => "local-lock",
            StrategyKind::EarlyRelease => "early-release",
            StrategyKind::RedisLock => "redis-lock",
            StrategyKind::Reserve => "reserve",
        }
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The strategy of `kind`.
pub fn build(kind: StrategyKind) -> Box<dyn Strategy> {
    match kind {
        StrategyKind::Naive => Box::new(naive::Naive),
        StrategyKind::Optimistic => Box::new(optimistic::Optimistic),
        StrategyKind::LocalLock => Box::new(local_lock::LocalLock::default()),
        StrategyKind::OptimisticVersion => Box::new(optimistic_version::OptimisticVersion),
        StrategyKind::OptimisticCompare => Box::new(optimistic_compare::OptimisticCompare),
        StrategyKind::EarlyRelease => Box::new(early_release::EarlyRelease),
        StrategyKind::RedisLock => Box::new(redis_lock::RedisLock),
        StrategyKind::Reserve => Box::new(reserve::Reserve),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn cli_names_and_display_agree() {
        for kind in StrategyKind::ALL {
            let parsed = StrategyKind::from_str(&kind.to_string(), false).unwrap();
            assert_eq!(parsed, kind);
            let possible = kind.to_possible_value().unwrap();
            assert_eq!(possible.get_name(), kind.name());
        }
    }
}

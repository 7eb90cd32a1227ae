//! Redlock: one lock over N independent masters, held while a majority grants it.

mod deployment;
pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod last_release;
pub(crate) mod lock;
pub(crate) mod node;
pub(crate) mod quorum;
pub(crate) mod watchdog;

pub use guard::RedlockGuard;
pub use handle::Redlock;
pub use lock::{NodeStatus, RedlockLock, RedlockStatus};

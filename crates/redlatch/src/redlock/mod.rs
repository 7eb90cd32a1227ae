//! Redlock: one lock over N independent masters, held while a majority grants it.

pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod lock;
pub(crate) mod node;
pub(crate) mod quorum;
pub(crate) mod watchdog;

pub use guard::RedlockGuard;
pub use handle::{DEFAULT_NODE_TIMEOUT_CAP, DEFAULT_RETRY_JITTER, Redlock};
pub use lock::{NodeStatus, RedlockLock, RedlockStatus};

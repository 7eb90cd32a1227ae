//! Deadlock detection: who waits for whom, across processes.
//!
//! A waiter whose acquire finds its lock held records, on the contended
//! path only, one wait-for edge: the key [`wait_key`] of its
//! [party](party_of) names the lock it waits for. Right after each busy
//! attempt one script (`deadlock/deadlock_check.lua`) walks from the
//! lock's holders along those edges; a walk that comes back to the waiter's
//! own party is a cycle, refused with [`Error::Deadlock`](crate::Error::Deadlock)
//! naming it ([`WaitLink`]), and the edge that would close it is never
//! written (only the closer is refused). The uncontended path writes and
//! reads nothing more. The check and the edge are the engine's
//! (`engine/deadlock_check.rs`, `engine/wait_edge.rs`): a waiter runs them.
//! Which holds count as one party, and what is not
//! covered: [`party_of`] and the README, "Deadlock detection".

mod party;
pub(crate) mod scripts;
mod waiting;

pub use crate::wait_link::WaitLink;
pub use party::MAX_EDGE_LIFE;
#[cfg(feature = "blocking")]
pub(crate) use party::on_caller_thread;
pub(crate) use party::{Suffix, anonymous_suffix, party_of_wait_key};
pub use party::{WAIT_KEY_PREFIX, party_of, wait_key};
pub use waiting::Waiting;

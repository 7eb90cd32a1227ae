//! A model of redlatch's lock protocol, checked with Stateright.
//!
//! Each script of `crates/redlatch/src/` (`*.lua`) is one atomic step on a
//! server's state ([`server`]); clients, the network, the server's clock and
//! the faults (pauses, lost and delayed replies, re-sends, NOSCRIPT
//! reordering, failovers, cancelled acquires) are the steps around them.
//! The checker explores every interleaving up to a bound ([`run`]) and
//! checks the promises of `docs/SAFETY.md`, each a property named after the
//! sentence it checks; the seeds' broken recipes, Redlock without fencing
//! and a failover without replica acknowledgement are modelled too, and the
//! checker finds their known failures, printed as timelines in the safety
//! lab's words ([`timeline`]).
//!
//! `docs/PROTOCOL-MODEL.md` explains what is modelled, the bound and how to
//! run the long mode.

#![deny(missing_docs)]

pub mod claims;
pub mod deadlock;
pub mod fair;
pub mod lock;
pub mod recipes;
pub mod redlock;
pub mod run;
pub mod rwlock;
pub mod scripts;
pub mod semaphore;
pub mod server;
pub mod store;
pub mod timeline;

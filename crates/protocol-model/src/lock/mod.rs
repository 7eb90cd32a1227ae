//! redlatch's reentrant lock (`client.lock(name)`): clients running the
//! engine's steps, one Redis master (and its replica, for failovers), the
//! network between them, the server's clock, a shared store, and the
//! faults of docs/SAFETY.md.
//!
//! A client wants the lock once: it acquires (parking until the unlock
//! message or the holder's lease end when busy), may re-enter with a short
//! fixed lease, lets its watchdog renew, checks `is_held()`, reads the
//! store, writes `read + 1` with its token, and releases every hold. The
//! engine's belief is the latest `sent_at + lease` of any confirmed request.

mod config;
mod narrate;
mod properties;
mod state;
mod steps;

pub use config::{Config, Faults};
pub use properties::names;
pub use state::{Action, Answer, Client, Kind, LockState, Phase, Request};

/// The model: a configuration; the state space follows from it.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// What is modelled and how far.
    pub config: Config,
}

//! The machinery every primitive shares: the per-client state, holds and
//! their renewal, wake-ups, the acquire attempt, calls that survive the
//! caller's cancellation, how a client makes a primitive from a name, and
//! (feature `blocking`) the runtime a blocking call blocks on.

pub(crate) mod acquire;
pub(crate) mod attempt;
#[cfg(feature = "blocking")]
pub(crate) mod blocking_handle;
#[cfg(feature = "blocking")]
pub(crate) mod bridge;
pub(crate) mod by_name;
pub(crate) mod cancel;
pub(crate) mod cluster_watch;
pub(crate) mod context;
pub(crate) mod hold;
pub(crate) mod hold_kind;
#[cfg(feature = "holder-records")]
pub(crate) mod identity;
pub(crate) mod key_text;
pub(crate) mod loss_watch;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
#[cfg(not(feature = "metrics"))]
#[path = "metrics_off.rs"]
pub(crate) mod metrics;
pub(crate) mod owner_field;
pub(crate) mod paged;
pub(crate) mod place;
pub(crate) mod primitive;
pub(crate) mod renewal;
pub(crate) mod reread;
pub(crate) mod schedule;
pub(crate) mod script_call;
pub(crate) mod sleep;
pub(crate) mod wait;
pub(crate) mod wakeup;
pub(crate) mod watchdog;
pub(crate) mod watched_holds;
pub(crate) mod watched_keys;
pub(crate) mod watched_renewals;

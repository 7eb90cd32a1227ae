//! The kit every lock kind shares: the guard and its family (the plug-in
//! a lock kind hands its guards), the request, the status, the handle
//! option macros, the lock hash's keys, and the scripts of a hold kept in
//! a lock hash field. No file here imports a lock kind's folder.

pub(crate) mod calls;
pub(crate) mod family;
pub(crate) mod guard;
pub(crate) mod handle_options;
pub(crate) mod hold_accessors;
#[cfg(feature = "holder-records")]
pub(crate) mod holder_identity;
pub(crate) mod keys;
pub(crate) mod release_on_drop;
pub(crate) mod request;
pub(crate) mod scripts;
pub(crate) mod status;

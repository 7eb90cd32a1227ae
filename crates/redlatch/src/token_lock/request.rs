//! What one acquire of a token lock asks for, shared by its attempt (the
//! engine's plug-in, `attempt.rs`) and its guard (`guard.rs`), and the
//! channel its waiters park on.

use std::sync::Arc;

use crate::base::keys::LockKeys;
use crate::token_lock::calls::ReleaseBy;

/// One acquire of a token lock.
#[derive(Clone)]
pub(crate) struct TokenAttempt {
    pub(crate) keys: Arc<LockKeys>,
    /// The token written into the key: the anonymous owner of this acquire
    /// (`<client-id>:#<n>@<task>`), unique to it.
    pub(crate) token: Arc<str>,
    pub(crate) lease_ms: u64,
    pub(crate) fenced: bool,
    pub(crate) release_by: ReleaseBy,
}

/// The channel a token lock's waiters of one client park on: local, never
/// subscribed (its messages are nudges from this process).
pub(crate) fn channel(key: &str) -> String {
    format!("redlatch_token_lock:{{{key}}}")
}

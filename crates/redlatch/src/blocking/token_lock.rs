//! The blocking token lock: the one [`Handle`], and the token lock's own methods.

use super::guard::Guard;
use crate::LockStatus;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`crate::TokenLock`]: the `SET key token NX PX lease` lock,
/// non-reentrant, with methods that block the calling thread. Each
/// method's round trips, keys and errors are those of the async method of
/// the same name; the acquires are [`Handle`]'s and return the blocking
/// [`Guard`].
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// let client = redlatch::blocking::Client::connect(&url)?;
/// let lock = client.token_lock("invoice:42");
/// let guard = lock.acquire()?;
/// assert!(lock.try_acquire()?.is_none()); // non-reentrant: held is held
/// assert_eq!(lock.status()?.holders[0].owner, guard.owner_token());
/// assert!(lock.force_unlock()?);
/// assert!(!guard.is_held());
/// # Ok::<(), redlatch::Error>(())
/// ```
pub type TokenLock = Handle<crate::TokenLock>;

impl Handle<crate::TokenLock> {
    /// The same lock, whose guards carry a fencing token (see
    /// [`crate::TokenLock::fenced`]).
    pub fn fenced(self) -> TokenLock {
        self.map(crate::TokenLock::fenced)
    }

    /// True when the server releases and renews it without any script (see
    /// [`crate::TokenLock::is_script_free`]).
    pub fn is_script_free(&self) -> bool {
        self.parts().0.is_script_free()
    }

    /// Deletes the lock whatever token its key holds (see
    /// [`crate::TokenLock::force_unlock`]).
    ///
    /// # Errors
    /// As [`crate::TokenLock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.run(
            "force unlock",
            |lock| async move { lock.force_unlock().await },
        )
    }

    /// A snapshot of the lock (see [`crate::TokenLock::status`]).
    ///
    /// # Errors
    /// As [`crate::TokenLock::status`].
    pub fn status(&self) -> Result<LockStatus> {
        self.run("status", |lock| async move { lock.status().await })
    }
}

impl Guard<crate::TokenGuard> {
    /// The token the lock's key holds for this hold (see
    /// [`crate::TokenGuard::owner_token`]).
    pub fn owner_token(&self) -> &str {
        self.get().owner_token()
    }

    /// The fencing token of a fenced lock's hold (see
    /// [`crate::TokenGuard::fencing_token`]).
    pub fn fencing_token(&self) -> Option<u64> {
        self.get().fencing_token()
    }
}

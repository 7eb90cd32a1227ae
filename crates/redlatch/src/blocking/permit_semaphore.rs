//! The blocking permit-expirable semaphore and its permit: the one
//! [`Handle`], and the semaphore's own methods.

use super::guard::Guard;
use crate::engine::blocking_handle::Handle;
use crate::error::Result;

/// A blocking [`crate::PermitSemaphore`]. Each method's round trips, keys and
/// errors are those of the async method of the same name; the acquires
/// (and [`with_lease`](Handle::with_lease) for permits that are not
/// renewed) are [`Handle`]'s. Permits are renewed by the client's runtime
/// while their guards live.
pub type PermitSemaphore = Handle<crate::PermitSemaphore>;

impl Handle<crate::PermitSemaphore> {
    /// Sets the permits if none are set (see [`crate::PermitSemaphore::try_set_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.run("permit try_set_permits", move |sem| async move {
            sem.try_set_permits(permits).await
        })
    }

    /// Adds (or takes away) permits (see [`crate::PermitSemaphore::add_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        self.run("permit add_permits", move |sem| async move {
            sem.add_permits(delta).await
        })
    }

    /// Reclaims expired permits and counts the free ones (see
    /// [`crate::PermitSemaphore::available_permits`]).
    ///
    /// # Errors
    /// As [`crate::PermitSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.run("permit available", |sem| async move {
            sem.available_permits().await
        })
    }
}

/// A blocking [`crate::ExpirablePermit`]: the blocking [`Guard`] of a
/// permit. Dropping it gives the permit back before the drop returns;
/// [`release`](Guard::release) does the same and reports errors.
pub type ExpirablePermit = Guard<crate::ExpirablePermit>;

impl Guard<crate::ExpirablePermit> {
    /// The permit id (see [`crate::ExpirablePermit::id`]).
    pub fn id(&self) -> &str {
        self.get().id()
    }
}

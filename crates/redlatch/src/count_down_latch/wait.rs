//! The count-down latch's plug-in for the engine's one wait loop: an
//! await is an [`Acquisition`] whose attempt reads the count.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::context::Core;
use crate::engine::wait::{Acquisition, Step, Wakes};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, Result};
use crate::settings::RetryPolicy;

use super::calls;
use super::keys::LatchKeys;

/// How long a waiter waits for a message before it reads the count again
/// anyway: a safety net for a latch changed outside the protocol (deleted
/// by hand, expired, flushed), which publishes nothing. Resubscriptions
/// wake every waiter by themselves.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// One await of a latch, as the wait loop drives it.
pub(crate) struct LatchAwait {
    pub(crate) core: Arc<Core>,
    pub(crate) keys: Arc<LatchKeys>,
}

impl Acquisition for LatchAwait {
    type Output = ();

    async fn attempt(&mut self) -> Result<Step<()>> {
        // Only a read: nothing to hand over or undo when the caller goes.
        match calls::count(&self.core, &self.keys).await? {
            0 => Ok(Step::Done {
                value: (),
                more_left: false,
            }),
            _ => Ok(Step::Busy { retry_in: RECHECK }),
        }
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(vec![self.core.wakeups.join_broadcast(&self.keys.channel)])
    }

    fn wakes(&self) -> Wakes {
        // The zero message opens the latch for every waiter at once.
        Wakes::All
    }

    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        // A read: safe to repeat after a connection error.
        error
            .is_transient()
            .then(|| self.core.current_settings().retry)
    }
}

//! The token lock's guard: proof of one hold, released on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::base::hold_accessors::hold_accessors;
use crate::base::keys::LockKeys;
use crate::base::release_on_drop::release_on_drop;
use crate::engine::acquire::Terms;
use crate::engine::cancel::run_to_end;
use crate::engine::context::Core;
use crate::engine::hold::{Hold, LostReason, NewHold};
use crate::engine::hold_kind::HoldKind;
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::token_lock::calls::{self, ReleaseBy, Route};
use crate::token_lock::request::{TokenAttempt, channel};

/// One hold on a [`TokenLock`](crate::TokenLock): the lock's key holds this
/// guard's [`owner_token`](TokenGuard::owner_token) until the guard is
/// released or dropped (renewed by the watchdog meanwhile, unless the lock
/// has a fixed lease).
///
/// Dropping it releases the lock in the background; call
/// [`release`](TokenGuard::release) to learn whether it was still held.
/// As for every lock, a guard cannot stop the world: a process paused past
/// the lease, or a key lost by Redis, lets another owner in while this
/// guard lives; [`lost`](TokenGuard::lost) says so as soon as the client
/// knows, and a [fenced](crate::TokenLock::fenced) lock's
/// [`fencing_token`](TokenGuard::fencing_token) lets the protected
/// resource refuse the overtaken holder's writes.
#[must_use = "dropping a guard releases the lock at once"]
pub struct TokenGuard {
    core: Arc<Core>,
    keys: Arc<LockKeys>,
    hold: Arc<Hold>,
    fence: Option<u64>,
    release_by: ReleaseBy,
    renewed: bool,
    released: bool,
}

impl std::fmt::Debug for TokenGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenGuard")
            .field("name", &self.keys.name())
            .field("owner_token", &self.hold.owner)
            .field("fencing_token", &self.fence)
            .field("held", &self.is_held())
            .finish()
    }
}

hold_accessors!(TokenGuard, "lock");

impl TokenGuard {
    /// Registers the hold `call` took (on `terms`, by `route`'s commands)
    /// with the watchdog, and returns its guard.
    pub(crate) fn register(
        core: &Arc<Core>,
        call: &TokenAttempt,
        terms: &Terms,
        route: Route,
        fence: Option<u64>,
        sent_at: LeaseInstant,
    ) -> TokenGuard {
        // A renewed hold is only asked for where a renewal exists
        // (`TokenLock::acquire_waiting` refuses it otherwise).
        let renewal = route.renewal.unwrap_or(&calls::SCRIPT_RENEWAL);
        let hold = core.watchdog.register(NewHold {
            key: call.keys.key.clone(),
            owner: call.token.clone(),
            kind: HoldKind::Batched(renewal),
            lease_ms: terms.lease_ms,
            renewed: terms.renewed,
            token: fence.unwrap_or(0),
            named_owner: false,
            sent_at,
        });
        tracing::Span::current().record("token", hold.token);
        tracing::debug!(fence, "redlatch: token lock acquired");
        crate::engine::metrics::acquired(false);
        TokenGuard {
            core: core.clone(),
            keys: call.keys.clone(),
            hold,
            fence,
            release_by: call.release_by,
            renewed: terms.renewed,
            released: false,
        }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// The Redis key of the lock (prefix included): a string holding
    /// [`owner_token`](TokenGuard::owner_token) while this guard holds.
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// The value this hold wrote into the key (`<client-id>:#<n>@<task>`), unique
    /// to this acquire: what the release and the renewals compare.
    pub fn owner_token(&self) -> &str {
        self.hold.owner.as_str(self.core.owner_prefix())
    }

    /// The fencing token of a [fenced](crate::TokenLock::fenced) lock's
    /// hold: strictly increasing per lock name in the order acquisitions
    /// took effect (docs/SAFETY.md, "Fencing tokens"). `None` for a lock
    /// that was not asked to fence.
    pub fn fencing_token(&self) -> Option<u64> {
        self.fence
    }

    /// The lease the hold was taken with: renewals keep it.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.hold.lease_ms())
    }

    /// True while the watchdog renews this hold (no fixed lease).
    pub fn is_renewed(&self) -> bool {
        self.hold.renewed()
    }

    /// Gives the lock back: deletes its key if it still holds this guard's
    /// token (`DELIFEQ`, `DELEX … IFEQ`, or a script where the server has
    /// neither), and wakes this client's waiters on it. One round trip.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the key no longer held this token (it
    /// expired, or was deleted or taken over): what the guard protected
    /// may have overlapped with another holder. [`Error::WrongType`] when
    /// the key was overwritten with another type. Connection errors
    /// ([`Error::OutcomeUnknown`] when the release may have run): the lock
    /// expires after its lease, since nobody renews it any more.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: it runs to its end
    /// in the background.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        let span = tracing::debug_span!("redlatch.release", lock = %self.keys.key);
        let release = self.stop_and_release();
        match run_to_end(&self.core.background, release)
            .instrument(span)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.hold.mark_lost(LostReason::Gone);
                Err(Error::NotHeld {
                    name: self.keys.name().to_owned(),
                })
            }
            Err(error @ Error::WrongType { .. }) => {
                self.hold.mark_lost(LostReason::Gone);
                Err(error)
            }
            Err(other) => Err(other.unknown_outcome("release")),
        }
    }

    /// Stops renewing; returns the release, to run to its end.
    fn stop_and_release(&self) -> impl Future<Output = Result<bool>> + Send + 'static {
        self.core.watchdog.remove_guard(&self.hold, self.renewed);
        let core = self.core.clone();
        let key = self.keys.key.clone();
        let token = self.hold.owner.text(self.core.owner_prefix());
        let by = self.release_by;
        async move {
            let limit = core.current_settings().response_timeout;
            let released = calls::release(&mut core.conn.clone(), &key, &token, by, limit).await;
            match &released {
                Ok(true) => {
                    // This client's waiters on the lock hear of it at once.
                    let channel = channel(&key);
                    if core.wakeups.is_listening(&channel) {
                        core.wakeups.nudge_local(&channel);
                    }
                }
                Ok(false) => crate::engine::metrics::release_not_held(),
                Err(_) => {}
            }
            released
        }
    }
}

release_on_drop!(TokenGuard);

//! The guard: proof of one hold on a lock, released on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use tracing::Instrument;

use crate::base::family::LockFamily;
use crate::base::hold_accessors::hold_accessors;
use crate::base::keys::{KeyShape, LockKeys};
use crate::base::release_on_drop::release_on_drop;
use crate::base::request::Request;
use crate::engine::acquire::Terms;
use crate::engine::cancel::{hand_over, run_to_end, spawn_undo};
use crate::engine::context::Core;
use crate::engine::hold::{Hold, LostReason, NewHold};
use crate::error::{Error, Result};
use crate::scripts::acquired::Acquired;
use crate::scripts::released::Released;

/// One hold on a lock. The lock stays held (renewed by the watchdog unless it
/// has a fixed lease) until the guard is released or dropped.
///
/// Dropping a guard releases it in the background; call
/// [`release`](Guard::release) to learn whether the lock was still held.
///
/// A guard cannot stop the world: if the process stalls longer than the
/// lease, or Redis loses the key, another owner may take the lock while this
/// guard still exists. [`lost`](Guard::lost) and [`is_held`](Guard::is_held)
/// report it as soon as the watchdog knows, and the [`token`](Guard::token)
/// lets the protected resource reject writes from a holder that was overtaken.
#[must_use = "dropping a guard releases the lock at once"]
pub struct Guard {
    core: Arc<Core>,
    /// The lock's keys but the key itself, which the hold keeps (the guard
    /// reads it there: 16 bytes fewer in every guard), and which kind of
    /// lock: they pick the scripts.
    shape: KeyShape,
    family: Arc<dyn LockFamily>,
    hold: Arc<Hold>,
    /// The lease this guard asked for, and whether it asked for renewal:
    /// its re-entries ask for the same. In ms; 32 bits hold the longest
    /// lease (30 days), and a guard kept small is kept by the thousand.
    lease_ms: u32,
    renewed: bool,
    released: bool,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name())
            .field("owner", &self.hold.owner)
            .field("token", &self.hold.token)
            .field("held", &self.is_held())
            .finish()
    }
}

hold_accessors!(Guard, "lock");

impl Guard {
    /// Registers the hold an attempt took (`acquired`, by `owner` on the
    /// `terms` of the acquire) with the watchdog, and returns its guard.
    pub(crate) fn register(
        core: &Arc<Core>,
        keys: LockKeys,
        family: Arc<dyn LockFamily>,
        owner: Arc<str>,
        terms: &Terms,
        acquired: Acquired,
    ) -> Guard {
        let hold = core.watchdog.register(NewHold {
            key: keys.key.clone(),
            owner,
            kind: family.renewal(),
            lease_ms: terms.lease_ms,
            renewed: terms.renewed,
            token: acquired.token,
            named_owner: terms.named,
            sent_at: acquired.sent_at,
        });
        tracing::Span::current().record("token", hold.token);
        tracing::debug!(
            token = hold.token,
            reentered = acquired.reentered,
            "redlatch: acquired"
        );
        crate::engine::metrics::acquired(acquired.reentered);
        Guard {
            core: core.clone(),
            shape: keys.shape(),
            family,
            hold,
            lease_ms: u32::try_from(terms.lease_ms).unwrap_or(u32::MAX),
            renewed: terms.renewed,
            released: false,
        }
    }

    /// The fencing token: strictly increasing per lock name across all
    /// clients, so a resource that remembers the highest token it accepted
    /// can refuse writes from a holder that lost the lock. Re-entries share
    /// the token of the acquisition they re-enter.
    pub fn token(&self) -> u64 {
        self.hold.token
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        LockKeys::name_in(&self.hold.key, self.shape)
    }

    /// The Redis key of the lock (prefix included).
    pub fn key(&self) -> &str {
        &self.hold.key
    }

    /// The owner field written in the lock hash: `<client-id>:<owner>`.
    pub fn owner(&self) -> &str {
        self.hold.owner.as_str(self.core.owner_prefix())
    }

    /// The lease this guard asked for: the client's default lease for
    /// watchdog-renewed guards, or the fixed lease given at acquire. Guards
    /// that share a hold (re-entries) keep the lock at least as long as the
    /// longest of their leases: no re-entry shortens the lock's lease.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.into())
    }

    /// True while the watchdog renews this guard's hold: this guard asked
    /// for renewal, or another live guard of the same hold (a re-entry) did.
    pub fn is_renewed(&self) -> bool {
        self.hold.renewed()
    }

    /// Takes one more hold for the same owner: the hold count goes up by one
    /// and the new guard has the same token. The lock is released when every
    /// guard is. One round trip.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the lock is no longer held by this owner,
    /// [`Error::WrongType`], connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future gives back a hold it may have taken.
    pub async fn reenter(&self) -> Result<Guard> {
        if self.hold.is_marked_lost() {
            // Sent anyway, it could re-enter a newer hold of the same named
            // owner and lengthen that hold's lease to this guard's.
            return Err(Error::NotHeld {
                name: self.name().to_owned(),
            });
        }
        let core = &self.core;
        let request = self.request();
        let sent_at = LeaseInstant::now();
        let call = self.family.reenter(self.core.clone(), request.clone());
        let undo = {
            let (core, request, family) = (self.core.clone(), request.clone(), self.family.clone());
            // Nobody took this hold: give it back.
            move |outcome: Result<bool>| async move {
                if matches!(outcome, Ok(true)) {
                    let _ = family.release(core, request).await;
                }
            }
        };
        let held = hand_over(&core.background, call, undo)
            .instrument(tracing::debug_span!("redlatch.reenter", lock = %request.keys.key, token = self.hold.token))
            .await?;
        if !held {
            self.hold.mark_lost(LostReason::Gone);
            return Err(Error::NotHeld {
                name: self.name().to_owned(),
            });
        }
        if !core
            .watchdog
            .add_guard(&self.hold, sent_at, request.lease_ms, self.renewed)
        {
            // Marked lost meanwhile although Redis still had it: give the hold
            // back, in the background so that cancelling the caller cannot stop it.
            let release = self.family.release(self.core.clone(), request);
            spawn_undo(&core.background, async move {
                let _ = release.await;
            });
            return Err(Error::NotHeld {
                name: self.name().to_owned(),
            });
        }
        Ok(self.sibling())
    }

    /// Gives this hold back: the hold count goes down by one, and the last
    /// hold deletes the lock and wakes one waiter (the next in line for a
    /// [`FairLock`](crate::FairLock); every waiter, for a read-write lock).
    /// One round trip.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the owner no longer held the lock (it expired,
    /// or was force-unlocked or taken over): whatever the guard protected may
    /// have overlapped with another holder. Connection errors: the lock
    /// expires after its lease, since nobody renews it any more.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: it runs to its end in the background.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        let span = tracing::debug_span!("redlatch.release", lock = %self.hold.key, token = self.hold.token);
        let release = self.stop_and_release();
        let outcome = run_to_end(&self.core.background, release)
            .instrument(span)
            .await;
        match outcome {
            Ok(_) => Ok(()),
            Err(Error::NotHeld { .. }) => {
                self.hold.mark_lost(LostReason::Gone);
                Err(Error::NotHeld {
                    name: self.name().to_owned(),
                })
            }
            Err(other) => Err(other.unknown_outcome("release")),
        }
    }

    /// Another guard of the same hold, asking for the same lease.
    fn sibling(&self) -> Guard {
        Guard {
            core: self.core.clone(),
            shape: self.shape,
            family: self.family.clone(),
            hold: self.hold.clone(),
            lease_ms: self.lease_ms,
            renewed: self.renewed,
            released: false,
        }
    }

    /// The client this guard's hold belongs to.
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The keys of the lock this guard holds.
    pub(crate) fn keys(&self) -> LockKeys {
        LockKeys::of_shape(self.hold.key.to_arc(), self.shape)
    }

    /// The hold this guard shares with its re-entries.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    fn request(&self) -> Request {
        Request {
            keys: self.keys(),
            owner: self.hold.owner.text(self.core.owner_prefix()),
            named_owner: self.hold.named_owner,
            lease_ms: self.lease_ms.into(),
            waited_ms: 0,
            wake_always: false,
        }
    }

    /// Stops tracking this guard; returns the release, to run to its end.
    fn stop_and_release(&self) -> impl Future<Output = Result<Released>> + Send + 'static {
        self.core.watchdog.remove_guard(&self.hold, self.renewed);
        let release = self.family.release(self.core.clone(), self.request());
        async move {
            let released = release.await;
            if let Err(Error::NotHeld { .. }) = released {
                crate::engine::metrics::release_not_held();
            }
            released
        }
    }
}

release_on_drop!(Guard);

//! Renewal of a Redlock hold: the client watchdog's engine renews it, on its
//! schedule, through a callback that extends the lease on every node at
//! once and counts only when a majority confirms within the validity.
//!
//! The hold is tracked by the watchdog of its first connected node's client;
//! the deadlines, the period, the retries and the lost-marking are the
//! engine's, as for every other hold.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use crate::engine::hold::LostReason;
use crate::engine::hold_kind::{RenewNow, Renewed};
use crate::error::Error;
use crate::lease_clock::LeaseInstant;
use crate::redlock::guard::RedlockHold;

impl RenewNow for RedlockHold {
    fn renew_now(self: Arc<Self>, lease_ms: u64) -> Pin<Box<dyn Future<Output = Renewed> + Send>> {
        Box::pin(async move {
            // Released meanwhile: a renewal now would only race the release.
            let renewed = tokio::select! {
                _ = self.stop.cancelled() => return Renewed::Failed("released".to_owned()),
                renewed = self.renew(lease_ms) => renewed,
            };
            match renewed {
                Ok(()) => Renewed::Yes,
                Err(Error::NotHeld { .. }) => {
                    tracing::warn!(lock = %self.name, "redlatch: Redlock lost: gone on too many nodes");
                    Renewed::Gone
                }
                Err(error) => Renewed::Failed(error.to_string()),
            }
        })
    }
}

/// Hands `shared`, acquired with requests sent from `acquired_at`, to the
/// renewal engine: renewed at a third of its lease, or (a fixed lease)
/// marked lost when the lease runs out. The engine lets go of it when the
/// last guard is released (see [`RedlockHold::host`]).
pub(crate) fn start(shared: &Arc<RedlockHold>, acquired_at: LeaseInstant) {
    match shared.host() {
        Some(host) => {
            let renew: Weak<dyn RenewNow> = Arc::downgrade(shared) as Weak<dyn RenewNow>;
            host.core
                .watchdog
                .track(shared.hold.clone(), acquired_at, renew);
        }
        // A majority of nodes took it, so one is connected; should none be,
        // nothing could renew it.
        None => shared.hold.mark_lost(LostReason::NotRenewed),
    }
}

//! What every acquire does besides its protocol, once for every primitive:
//! it chooses its owner and lease ([`Terms`]), runs inside its tracing
//! span, and its time and outcome go to the acquire histogram
//! ([`acquire_measured`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::{Instrument, Span};

use crate::engine::context::Core;
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::scripts::keys::validate_owner;
use crate::settings::{RetryPolicy, limits};

/// Who acquires, and for how long: chosen once per acquire call.
#[derive(Debug, Clone)]
pub(crate) struct Terms {
    /// The owner field: `<client-id>:<owner>` (named) or `<client-id>:#<n>@<task>`
    /// (anonymous, unique to this acquire).
    pub(crate) owner: Arc<str>,
    /// The caller named the owner.
    pub(crate) named: bool,
    pub(crate) lease_ms: u64,
    /// The watchdog renews the hold (the client's default lease), or the
    /// fixed lease runs out.
    pub(crate) renewed: bool,
}

impl Terms {
    /// The terms of an acquire by `owner` (the caller's name for it, or
    /// `None` for a fresh anonymous one) with `lease` (a fixed lease, or
    /// `None` for the client's default lease, renewed).
    ///
    /// # Errors
    /// [`crate::Error::InvalidOwner`], [`crate::Error::InvalidDuration`].
    pub(crate) fn choose(
        core: &Core,
        owner: Option<&str>,
        lease: Option<Duration>,
    ) -> Result<Terms> {
        let (lease_ms, renewed) = lease_choice(core, lease)?;
        let (owner, named) = match owner {
            Some(owner) => {
                validate_owner(owner)?;
                (core.named_owner(owner), true)
            }
            None => (core.anonymous_owner(), false),
        };
        Ok(Terms {
            owner,
            named,
            lease_ms,
            renewed,
        })
    }

    /// Whether an acquire may try again after an attempt failed with
    /// `error`: connection errors are retried for anonymous owners only,
    /// each retry under a fresh owner, since the attempt it replaces may
    /// still be giving back a hold under the old one. Returns the retry
    /// policy, having taken the fresh owner; `None` gives up.
    pub(crate) fn retry_after(&mut self, core: &Core, error: &Error) -> Option<RetryPolicy> {
        if !error.is_transient() || self.named {
            return None;
        }
        self.owner = core.anonymous_owner();
        Some(core.current_settings().retry)
    }
}

/// The lease of a hold and whether the watchdog renews it: a fixed `lease`
/// that runs out, or (`None`) the client's default lease, renewed. For
/// every hold that has a lease, permits included.
///
/// # Errors
/// [`crate::Error::InvalidDuration`].
pub(crate) fn lease_choice(core: &Core, lease: Option<Duration>) -> Result<(u64, bool)> {
    Ok(match lease {
        None => (
            limits::watchdog_lease_millis("default lease", core.current_settings().default_lease)?,
            true,
        ),
        Some(fixed) => (limits::lease_millis("lease", fixed)?, false),
    })
}

/// Runs `acquire` inside `span` and records how long it took and how it
/// ended (`acquired`, `not_acquired`, `error`).
///
/// A plain function around two adapters, not an `async fn`: an `async fn`
/// keeps room for its argument beside the instrumented future it moved it
/// into, so every parked waiter carried its acquire's state twice (about
/// 1.3 KB; docs/BENCHMARKS.md, measure 5).
pub(crate) fn acquire_measured<T, F>(
    span: Span,
    acquire: F,
) -> impl Future<Output = Result<Option<T>>>
where
    F: Future<Output = Result<Option<T>>>,
{
    let started = LeaseInstant::now();
    acquire.instrument(span).map(move |outcome| {
        let label = match &outcome {
            Ok(Some(_)) => "acquired",
            Ok(None) => "not_acquired",
            Err(_) => "error",
        };
        crate::engine::metrics::acquire_finished(label, started.elapsed());
        outcome
    })
}

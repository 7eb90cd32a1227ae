//! What every acquire does besides its protocol: it runs inside its tracing
//! span, and its time and outcome go to the acquire histogram.

use std::future::Future;

use tracing::{Instrument, Span};

use crate::error::Result;
use crate::lease_clock::LeaseInstant;

/// Runs `acquire` inside `span` and records how long it took and how it
/// ended (`acquired`, `not_acquired`, `error`).
pub(crate) async fn acquire_measured<T>(
    span: Span,
    acquire: impl Future<Output = Result<Option<T>>>,
) -> Result<Option<T>> {
    let started = LeaseInstant::now();
    let outcome = acquire.instrument(span).await;
    let label = match &outcome {
        Ok(Some(_)) => "acquired",
        Ok(None) => "not_acquired",
        Err(_) => "error",
    };
    crate::metrics::acquire_finished(label, started.elapsed());
    outcome
}

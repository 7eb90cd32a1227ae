//! Talking to Redis: where it is, the command and subscription connections,
//! and the time limit on each call.

pub(crate) mod capabilities;
pub(crate) mod connection;
// Only the holder records send a last word as the runtime stops.
#[cfg(feature = "holder-records")]
pub(crate) mod detached;
pub(crate) mod idle;
pub(crate) mod no_evict;
pub(crate) mod script_routes;
pub(crate) mod sentinel;
pub(crate) mod shared;
pub(crate) mod subscription;
pub(crate) mod tls;
pub(crate) mod topology;
pub(crate) mod watch;

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result, TimeLimit};

pub(crate) use connection::Connection;

/// Runs one call, failing with [`Error::ResponseTimeout`] after `limit`,
/// the response timeout.
pub(crate) async fn bounded<T>(
    op: &'static str,
    limit: Duration,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    bounded_by(op, limit, TimeLimit::Response, call).await
}

/// Runs one call, failing after `limit` with [`Error::ResponseTimeout`]
/// naming `which` limit that was.
pub(crate) async fn bounded_by<T>(
    op: &'static str,
    limit: Duration,
    which: TimeLimit,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or(Err(Error::ResponseTimeout { op, limit: which }))
}

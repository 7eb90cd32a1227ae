//! A cap on the requests an instance works on at once (`--max-in-flight`):
//! beyond it a request is answered 503 `overloaded` with `Retry-After` at
//! once, instead of queueing behind the others. When Redis or the database
//! stalls, requests stop finishing; without the cap they would pile up
//! (each holding a socket, a task and its memory) until the stall ends.
//! Health checks and metrics are never refused, so an operator and a load
//! balancer still see the instance.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;
use super::error_code::ErrorCode;

/// The default `--max-in-flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// The permits: one per request being worked on.
#[derive(Clone, Debug)]
pub struct InFlight {
    permits: Arc<Semaphore>,
    max: usize,
}

impl InFlight {
    /// At most `max` requests at once (at least 1).
    pub fn new(max: usize) -> InFlight {
        let max = max.max(1);
        InFlight {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`), around every route.
pub async fn limit(State(in_flight): State<InFlight>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path.starts_with("/health") || path == "/metrics" {
        return next.run(request).await;
    }
    match in_flight.permits.clone().try_acquire_owned() {
        Ok(permit) => {
            let response = next.run(request).await;
            drop(permit);
            response
        }
        Err(_) => ApiError::with_message(
            ErrorCode::Overloaded,
            format!(
                "this instance is working on {} requests already",
                in_flight.max
            ),
        )
        .into_response(),
    }
}

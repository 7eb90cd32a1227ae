//! The HTTP API (axum): routes and the state they share.
//!
//! | method and path | success | errors |
//! |---|---|---|
//! | `POST /vouchers` | 201 `{"id"}` | 400 |
//! | `GET /vouchers` | 200 `{"vouchers"}`: the newest 100, by id | |
//! | `GET /vouchers/{id}` | 200 voucher | 404 |
//! | `POST /vouchers/{id}/orders` + `X-User-Id` | 201 `{"order_id"}` | 400, 403, 404, 409, 410, 503, 500 |
//! | `GET /vouchers/{id}/orders` | 200 `{"count","orders"}` | 404 |
//! | `GET /health` | 200 `{"status","instance","strategy"}` | |
//! | `GET /metrics` | 200 Prometheus text | |
//! | `GET /` | the web page | |
//! | another path / method | | 404 `not_found` / 405 `method_not_allowed` |
//!
//! Every error is JSON: `{"error": code}`, plus `"message"` when there is
//! more to say ([`error::ApiError`]).

pub mod error;
mod ops;
mod orders;
mod user_id;
mod voucher_id;
mod vouchers;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::strategy::{OrderContext, Strategy, StrategyKind};

/// What every handler of one instance shares.
pub struct AppState {
    /// Database, Redis, locks, ids.
    pub ctx: OrderContext,
    /// How orders are placed.
    pub strategy: Box<dyn Strategy>,
    /// Its name, for `/health` and metrics labels.
    pub kind: StrategyKind,
    /// This instance's id.
    pub instance: u16,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
}

/// The routes of one instance.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(ops::page))
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route("/vouchers", post(vouchers::create).get(vouchers::list))
        .route("/vouchers/{id}", get(vouchers::show))
        .route(
            "/vouchers/{id}/orders",
            post(orders::place).get(orders::list),
        )
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}

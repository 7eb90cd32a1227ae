//! The HTTP API (axum): routes and the state they share.
//!
//! | method and path | success | errors |
//! |---|---|---|
//! | `POST /vouchers` | 201 `{"id"}` | 400, 401 (with `--admin-token`) |
//! | `GET /vouchers` | 200 `{"vouchers"}`: the newest 100, by id | |
//! | `GET /vouchers/{id}` | 200 voucher | 404 |
//! | `POST /vouchers/{id}/orders` + `X-User-Id` | 201 `{"order_id"}` | 400, 403, 404, 409, 410, 503, 500 |
//! | `GET /vouchers/{id}/orders` | 200 `{"count","orders"}` | 404 |
//! | `GET /health` | 200 `{"status","instance","strategy"}` | |
//! | `GET /metrics` | 200 Prometheus text | |
//! | `GET /` | the web page | |
//! | `GET /admin/dead-letters[?after=ID]` | 200 `{"count","entries":[{"id","order_id","user_id","voucher_id","created_at","reason","tries","source_id","error"}]}`, oldest first, at most 100 | 400, 401, 503 |
//! | `POST /admin/dead-letters/{id}/replay` | 200 `{"replayed":1,"stream_id"}`: back on the order stream | 401, 404, 503 |
//! | `POST /admin/dead-letters/replay` | 200 `{"replayed":n}` | 401, 503 |
//! | another path / method | | 404 `not_found` / 405 `method_not_allowed` |
//!
//! Every error is JSON: `{"error": code}`, plus `"message"` when there is
//! more to say ([`error::ApiError`]).
//!
//! `POST /vouchers` and `/admin/*` are guarded by one check (`admin.rs`
//! module): with `--admin-token T` they need `Authorization: Bearer T` (401
//! `unauthorized` and `WWW-Authenticate: Bearer` otherwise); without a token
//! `POST /vouchers` is open and `/admin/*` answers only on a loopback listen
//! address (401 on any other).

mod admin;
pub mod error;
mod ops;
mod orders;
mod user_id;
mod voucher_id;
mod vouchers;

use std::sync::Arc;

pub use admin::AdminAccess;

use axum::Router;
use axum::middleware::from_fn_with_state;
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
    /// Who may create vouchers and use `/admin/*`.
    pub admin: AdminAccess,
}

/// The routes of one instance.
pub fn router(state: Arc<AppState>) -> Router {
    let admin_routes = Router::new()
        .route("/admin/dead-letters", get(admin::list))
        .route("/admin/dead-letters/replay", post(admin::replay_all))
        .route("/admin/dead-letters/{id}/replay", post(admin::replay_one))
        .route_layer(from_fn_with_state(state.clone(), admin::guard_admin));
    let guard_writes = from_fn_with_state(state.clone(), admin::guard_writes);
    Router::new()
        .route("/", get(ops::page))
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route(
            "/vouchers",
            post(vouchers::create)
                .route_layer(guard_writes)
                .get(vouchers::list),
        )
        .route("/vouchers/{id}", get(vouchers::show))
        .route(
            "/vouchers/{id}/orders",
            post(orders::place).get(orders::list),
        )
        .merge(admin_routes)
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}

//! The HTTP API (axum): the routes; the state they share is [`AppState`].
//!
//! | method and path | success | errors |
//! |---|---|---|
//! | `POST /vouchers` (JSON) | 201 `{"id"}` | 400, 401 (the admin check), 403 (another site), 415 |
//! | `GET /vouchers` | 200 `{"vouchers"}`: the newest 100, by id | |
//! | `GET /vouchers/{id}` | 200 voucher | 404 |
//! | `POST /vouchers/{id}/orders` + the user ([`auth`]) | 201 `{"order_id","status":"pending"}` (202 with `reserve`) | 400, 401, 403, 404, 409, 410, 429, 503, 500 |
//! | `GET /vouchers/{id}/orders[?after&limit]`, the admin | 200 `{"count","orders","next"}`, a page | 400, 401, 404 |
//! | `GET /orders/{id}`, its buyer or the admin | 200 `{"order_id","voucher_id","user_id","status","created_at"}` | 401, 404 (also another user's) |
//! | `POST /orders/{id}/pay`, `/cancel` + the user ([`auth`]) | 200 the order | 400, 401, 403 `forbidden`, 404, 409 `not_pending`, 429, 503, 500 |
//! | `GET /health` | 200 `{"status","instance","strategy"}` | |
//! | `GET /health/live` | 200 `{"status":"ok"}`: the process answers | |
//! | `GET /health/ready` | 200 `{"status":"ready"}`: Redis and the database answer (and the `reserve` consumer consumes) | 503 `{"status":"unavailable","failing":[...]}` (`redis`, `database`, `consumer`, `draining`) |
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
//! they answer only on a loopback listen address (401 on any other). Every
//! POST a browser marks as sent from another origin is refused 403
//! `forbidden` (`same_origin.rs`).
//!
//! Around the handlers: [`idempotency`] on the routes' POSTs with `Idempotency-Key`
//! (400 `bad_idempotency_key`, 409 `in_progress`, 422
//! `idempotency_key_reused`, 503 `redis_unavailable`; a replay carries
//! `Idempotent-Replayed: true`); [`rate_limit`] on the routes that act for a
//! user (429 `rate_limited` + `Retry-After`); [`auth`] in those handlers (400
//! `bad_user_id` in header mode, 401 `unauthorized` + `WWW-Authenticate:
//! Bearer` in jwt mode); [`sold_out`] in order placement (410 `sold_out`
//! from memory).

mod admin;
pub mod auth;
mod dead_letters;
pub mod error;
pub mod error_code;
pub mod idempotency;
pub mod in_flight;
mod ops;
mod order_actions;
mod orders;
mod path_id;
pub mod rate_limit;
mod same_origin;
mod security_headers;
pub mod sold_out;
mod state;
mod user_id;
mod vouchers;

use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

pub use admin::AdminAccess;
pub use state::AppState;

/// The routes of one instance.
pub fn router(state: Arc<AppState>) -> Router {
    let admin_routes = Router::new()
        .route("/admin/dead-letters", get(dead_letters::list))
        .route("/admin/dead-letters/replay", post(dead_letters::replay_all))
        .route(
            "/admin/dead-letters/{id}/replay",
            post(dead_letters::replay_one),
        )
        .route_layer(from_fn_with_state(state.admin.clone(), admin::guard_admin));
    let guard_writes = from_fn_with_state(state.admin.clone(), admin::guard_writes);
    // The per-user rate limit, for the routes that act for a user.
    let limited = || from_fn_with_state(state.clone(), rate_limit::limit::<AppState>);
    Router::new()
        .route("/", get(ops::page))
        .route("/health", get(ops::health))
        .route("/health/live", get(ops::live))
        .route("/health/ready", get(ops::ready))
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
            post(orders::place).route_layer(limited()),
        )
        .route("/vouchers/{id}/orders", get(orders::list))
        .route("/orders/{id}", get(order_actions::show))
        .route(
            "/orders/{id}/pay",
            post(order_actions::pay).route_layer(limited()),
        )
        .route(
            "/orders/{id}/cancel",
            post(order_actions::cancel).route_layer(limited()),
        )
        .merge(admin_routes)
        // Around the routes only (not the fallback: no records for made-up
        // paths), outside the rate limit: a replayed answer costs no
        // rate-limit budget, and a 429 is never kept as a key's answer.
        .route_layer(from_fn_with_state(state.clone(), idempotency::guard))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        // Before any work: a stalled dependency must not let requests pile up.
        .layer(from_fn_with_state(
            state.in_flight.clone(),
            in_flight::limit,
        ))
        // Outermost: another site's page changes nothing.
        .layer(axum::middleware::from_fn(same_origin::guard))
        .layer(axum::middleware::from_fn(security_headers::add))
        .with_state(state)
}

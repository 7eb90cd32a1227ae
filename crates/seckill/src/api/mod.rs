//! The HTTP API (axum): routes and the state they share.
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
mod user_id;
mod vouchers;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use admin::AdminAccess;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;

use self::auth::Auth;
use self::rate_limit::RateLimits;
use self::sold_out::SoldOutFlags;

use crate::reserve_consumer::health::ConsumerHealth;
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
    /// Set when a graceful shutdown starts: `/health/ready` answers 503.
    pub draining: AtomicBool,
    /// Who may create vouchers and use `/admin/*`.
    pub admin: AdminAccess,
    /// Who the user is (`--auth`); handlers take [`auth::AuthUser`].
    pub auth: Auth,
    /// The per-user rate limit (`--rate-limit`), this instance's share.
    pub rate_limits: RateLimits,
    /// Vouchers this instance saw sell out (`--sold-out-recheck`).
    pub sold_out: SoldOutFlags,
    /// `--payment-timeout`: a payment after it expires the order instead.
    pub payment_timeout: std::time::Duration,
    /// New idempotency keys a caller may claim a day.
    pub idempotency_keys_per_day: u64,
    /// The requests being worked on (`--max-in-flight`).
    pub in_flight: in_flight::InFlight,
    /// `reserve`: whether the consumer is consuming (for `/health/ready`).
    pub consumer_health: Option<Arc<ConsumerHealth>>,
}

impl AppState {
    /// A graceful shutdown has started: report not ready from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether a graceful shutdown has started.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// A unit of `voucher_id` went back on sale through this instance
    /// (a cancel, an expiry).
    pub fn stock_returned(&self, voucher_id: i64) {
        tracing::debug!(voucher_id, "seckill: a unit is back on sale");
        self.sold_out.clear(voucher_id);
    }
}

/// The routes of one instance.
pub fn router(state: Arc<AppState>) -> Router {
    let admin_routes = Router::new()
        .route("/admin/dead-letters", get(admin::list))
        .route("/admin/dead-letters/replay", post(admin::replay_all))
        .route("/admin/dead-letters/{id}/replay", post(admin::replay_one))
        .route_layer(from_fn_with_state(state.clone(), admin::guard_admin));
    let guard_writes = from_fn_with_state(state.clone(), admin::guard_writes);
    // The per-user rate limit, for the routes that act for a user.
    let limited = || from_fn_with_state(state.clone(), rate_limit::limit);
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
        .layer(from_fn_with_state(state.clone(), in_flight::limit))
        // Outermost: another site's page changes nothing.
        .layer(axum::middleware::from_fn(same_origin::guard))
        .layer(axum::middleware::from_fn(security_headers::add))
        .with_state(state)
}

//! What every handler of one instance shares.
//!
//! The parts it holds (the admin check, the user check, the rate limit, the
//! in-flight cap, the sold-out flags) are declared in their own files,
//! which do not import this one: their middleware takes only its part, or
//! the state through a small trait of its own ([`Limited`], `AsRef<Auth>`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use metrics_exporter_prometheus::PrometheusHandle;

use super::admin::AdminAccess;
use super::auth::Auth;
use super::in_flight::InFlight;
use super::rate_limit::{Limited, RateLimits};
use super::sold_out::SoldOutFlags;
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
    /// Who the user is (`--auth`); handlers take `AuthUser` (`api/auth.rs`).
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
    pub in_flight: InFlight,
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

impl AsRef<Auth> for AppState {
    fn as_ref(&self) -> &Auth {
        &self.auth
    }
}

impl Limited for AppState {
    fn rate_limits(&self) -> &RateLimits {
        &self.rate_limits
    }

    fn instance(&self) -> u16 {
        self.instance
    }
}

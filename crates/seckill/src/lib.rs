//! The flash-sale ("seckill") voucher shop of seed 004, on redlatch.
//!
//! A voucher has a time window and a stock that must never be oversold, and
//! each user may order it once, across several instances of the service
//! behind a load balancer. The strategies in [`strategy`] walk the seed's
//! evolution from the naive check-then-act that oversells to a per-user
//! redlatch lock and an atomic Redis reservation.

pub mod api;
pub mod db;
pub mod demo;
pub mod http_server;
pub mod id_worker;
pub mod lifecycle;
pub mod load;
pub mod metrics;
pub mod reserve_consumer;
pub mod sale_window;
pub mod serve;
pub mod strategy;

/// The error type of the binaries' top-level functions.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

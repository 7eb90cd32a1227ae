//! The service's integration tests: HTTP contract, sale window, strategies,
//! sell-outs over two instances, a crash under the reserve strategy, its
//! dead letters, retries and trimming, the admin token, schema
//! kinds, order ids, random HTTP input, and the API's protection (auth,
//! idempotency keys, rate limit, sold-out flag). Every test starts its own redis-server and its own
//! database (see `service/support.rs` for the backends).

#[path = "service/support.rs"]
mod support;

#[path = "service/api.rs"]
mod api;
#[path = "service/dashboards.rs"]
mod dashboards;
#[path = "service/dead_letter.rs"]
mod dead_letter;
#[path = "service/deployments.rs"]
mod deployments;
#[path = "service/docs.rs"]
mod docs;
#[path = "service/expiry.rs"]
mod expiry;
#[path = "service/exposure.rs"]
mod exposure;
#[path = "service/failures.rs"]
mod failures;
#[path = "service/fencing.rs"]
mod fencing;
#[path = "service/fuzz.rs"]
mod fuzz;
#[path = "service/health.rs"]
mod health;
#[path = "service/ids.rs"]
mod ids;
#[path = "service/lifecycle.rs"]
mod lifecycle;
#[path = "service/outage.rs"]
mod outage;
#[path = "service/protection.rs"]
mod protection;
#[path = "service/reserve_crash.rs"]
mod reserve_crash;
#[path = "service/schema.rs"]
mod schema;
#[path = "service/sell_out.rs"]
mod sell_out;
#[path = "service/strategies.rs"]
mod strategies;

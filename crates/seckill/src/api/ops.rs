//! The operational endpoints: health, metrics, the web page, and 404s.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use serde_json::{Value, json};

use super::error::ApiError;
use super::error_code::ErrorCode;
use super::state::AppState;

/// The single-page UI (written alongside the load generator and the demo).
pub(crate) const PAGE: &str = include_str!("../web/index.html");

/// `GET /`
pub async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// `GET /health`: the process answers; which instance and strategy it is.
pub async fn health(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "instance": state.instance,
        "strategy": state.kind.name(),
    }))
}

/// How long `/health/ready` waits for each dependency.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /health/live`: the process answers (restart it if not).
pub async fn live() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /health/ready`: Redis and the database answer, the `reserve`
/// consumer is consuming, and no shutdown has started (send it traffic);
/// 503 naming what fails otherwise.
pub async fn ready(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    let redis = async {
        let mut conn = state.ctx.redis.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .is_ok()
    };
    let database = state.ctx.db.ping();
    let (redis_ok, database_ok) = tokio::join!(
        tokio::time::timeout(READY_TIMEOUT, redis),
        tokio::time::timeout(READY_TIMEOUT, database),
    );
    let mut failing = Vec::new();
    if !matches!(redis_ok, Ok(true)) {
        failing.push("redis");
    }
    if !matches!(database_ok, Ok(Ok(()))) {
        failing.push("database");
    }
    if let Some(error) = state.consumer_health.as_ref().and_then(|h| h.stuck()) {
        tracing::warn!(%error, "seckill: not ready: the reserve consumer keeps failing");
        failing.push("consumer");
    }
    if state.is_draining() {
        failing.push("draining");
    }
    if failing.is_empty() {
        (StatusCode::OK, Json(json!({ "status": "ready" })))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "failing": failing })),
        )
    }
}

/// `GET /metrics`: Prometheus text exposition.
pub async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    // Summaries roll their windows on upkeep; a scrape is a fine moment.
    state.metrics.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

/// Any other path: 404 `not_found`, as JSON like every other error.
pub async fn not_found() -> ApiError {
    ApiError::not_found()
}

/// A known path with another method: 405 `method_not_allowed`.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed)
}

//! The admin routes over the `reserve` strategy's dead letters: list them,
//! put one or all back on the order stream. Guarded by the admin check
//! (`admin.rs`) in the router.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::state::AppState;
use crate::reserve_consumer::dead_letter::{self, DeadLetter};
use crate::strategy::OrderError;

/// The query of `GET /admin/dead-letters`.
#[derive(Deserialize)]
pub(crate) struct Page {
    after: Option<String>,
}

/// `GET /admin/dead-letters[?after=ID]` → `{"count","entries"}`: how many
/// dead letters there are, and up to 100 of them, oldest first, after `ID`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    Query(page): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    if let Some(after) = &page.after
        && !dead_letter::is_stream_id(after)
    {
        return Err(ApiError::bad_request(
            "after must be a dead letter's id, MILLISECONDS-SEQUENCE",
        ));
    }
    let mut conn = state.ctx.redis.clone();
    let (count, entries) = dead_letter::list(&mut conn, page.after.as_deref())
        .await
        .map_err(redis_error)?;
    let entries: Vec<Value> = entries.iter().map(entry_json).collect();
    Ok(Json(json!({ "count": count, "entries": entries })))
}

/// `POST /admin/dead-letters/{id}/replay` → `{"replayed":1,"stream_id"}`,
/// the entry back on the order stream; 404 when there is no such dead letter.
pub(crate) async fn replay_one(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !dead_letter::is_stream_id(&id) {
        return Err(ApiError::not_found());
    }
    let mut conn = state.ctx.redis.clone();
    let requeued = dead_letter::replay(&mut conn, &id)
        .await
        .map_err(redis_error)?
        .ok_or_else(ApiError::not_found)?;
    tracing::info!(dead_letter = %id, stream_id = %requeued, "seckill: dead letter replayed");
    Ok(Json(json!({ "replayed": 1, "stream_id": requeued })))
}

/// `POST /admin/dead-letters/replay` → `{"replayed":n}`: every dead letter
/// back on the order stream.
pub(crate) async fn replay_all(
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ApiError> {
    let mut conn = state.ctx.redis.clone();
    let replayed = dead_letter::replay_all(&mut conn)
        .await
        .map_err(redis_error)?;
    tracing::info!(replayed, "seckill: dead letters replayed");
    Ok(Json(json!({ "replayed": replayed })))
}

fn redis_error(error: redis::RedisError) -> ApiError {
    ApiError::from(OrderError::from(error))
}

/// A dead letter as JSON: numeric fields as numbers when they are integers,
/// as the text found otherwise (a malformed entry), `null` when missing.
fn entry_json(entry: &DeadLetter) -> Value {
    let number = |name: &str| match entry.fields.get(name) {
        Some(text) => text
            .parse::<i64>()
            .map_or_else(|_| Value::from(text.clone()), Value::from),
        None => Value::Null,
    };
    let text = |name: &str| {
        entry
            .fields
            .get(name)
            .map_or(Value::Null, |text| Value::from(text.clone()))
    };
    json!({
        "id": entry.id,
        "order_id": number("order_id"),
        "user_id": number("user_id"),
        "voucher_id": number("voucher_id"),
        "created_at": number("created_at"),
        "reason": text("reason"),
        "tries": number("tries"),
        "source_id": text("source_id"),
        "error": text("error"),
    })
}

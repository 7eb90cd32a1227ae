//! `POST /vouchers/{id}/orders` (place an order) and `GET /vouchers/{id}/orders`.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::auth::AuthUser;
use super::error::ApiError;
use super::path_id::PathId;
use crate::lifecycle::OrderStatus;
use crate::metrics;
use crate::strategy::OrderError;

/// `POST /vouchers/{id}/orders` for the [`AuthUser`] → 201
/// `{"order_id","status":"pending"}` when the order is written, 202 with
/// the same body when it is accepted for writing (`reserve`).
pub async fn place(
    State(state): State<Arc<AppState>>,
    voucher: Result<PathId, ApiError>,
    user: Result<AuthUser, ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let started = Instant::now();
    let outcome = async {
        let PathId(voucher_id) = voucher?;
        let AuthUser(user_id) = user?;
        if state.sold_out.answers(voucher_id) {
            metrics::sold_out_flag_answer(state.instance);
            return Err(OrderError::SoldOut.into());
        }
        let placed = state.strategy.order(&state.ctx, voucher_id, user_id).await;
        match &placed {
            Ok(_) => state.sold_out.clear(voucher_id),
            Err(OrderError::SoldOut) => state.sold_out.mark(voucher_id),
            Err(_) => {}
        }
        let order_id = placed?;
        let status = if state.strategy.accepts_for_writing() {
            StatusCode::ACCEPTED
        } else {
            StatusCode::CREATED
        };
        let body = json!({ "order_id": order_id, "status": OrderStatus::Pending.as_str() });
        Ok((status, Json(body)))
    }
    .await;
    let rejection = outcome
        .as_ref()
        .err()
        .map(|error: &ApiError| error.code.as_str());
    metrics::order_answered(
        state.instance,
        state.kind.name(),
        rejection,
        started.elapsed(),
    );
    outcome
}

/// `GET /vouchers/{id}/orders` → `{"count", "orders": [{"order_id", "user_id"}]}`
/// by order id; 404 when the voucher does not exist.
pub async fn list(
    State(state): State<Arc<AppState>>,
    PathId(voucher_id): PathId,
) -> Result<Json<Value>, ApiError> {
    let db = &state.ctx.db;
    if db.find_voucher(voucher_id).await?.is_none() {
        return Err(ApiError::not_found());
    }
    let orders = db.list_orders(voucher_id).await?;
    let listed: Vec<Value> = orders
        .iter()
        .map(|order| json!({ "order_id": order.id, "user_id": order.user_id }))
        .collect();
    Ok(Json(json!({ "count": listed.len(), "orders": listed })))
}

//! One order after it is placed: `GET /orders/{id}`, `POST /orders/{id}/pay`,
//! `POST /orders/{id}/cancel` (see [`lifecycle`](crate::lifecycle)).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::admin::{Guarded, authorize};
use super::auth::AuthUser;
use super::error::ApiError;
use super::path_id::PathId;
use super::state::AppState;
use super::vouchers::rfc3339;
use crate::db::StoredOrder;
use crate::lifecycle::{End, TransitionError, end_order};
use crate::strategy::StrategyKind;

/// `GET /orders/{id}` by its buyer or the admin → the order; 404 when there
/// is none (a `reserve` order appears once its consumer has written it,
/// usually within milliseconds of the 202) or it is someone else's (ids are
/// sequential: another user learns nothing, not even that it exists).
pub async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    PathId(order_id): PathId,
    user: Result<AuthUser, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let admin = authorize(&state.admin, &headers, Guarded::Admin).is_ok();
    let reader = match user {
        Ok(AuthUser(user)) => Some(user),
        Err(_) if admin => None,
        Err(refused) => return Err(refused),
    };
    let order = state
        .ctx
        .db
        .order(order_id)
        .await?
        .filter(|order| admin || reader == Some(order.order.user_id))
        .ok_or_else(ApiError::not_found)?;
    Ok(Json(order_json(&order)))
}

/// `POST /orders/{id}/pay` by the order's buyer → the paid order.
pub async fn pay(
    state: State<Arc<AppState>>,
    order_id: PathId,
    buyer: AuthUser,
) -> Result<Json<Value>, ApiError> {
    end(state, order_id, buyer, End::Pay).await
}

/// `POST /orders/{id}/cancel` by the order's buyer → the cancelled order;
/// its unit goes back on sale.
pub async fn cancel(
    state: State<Arc<AppState>>,
    order_id: PathId,
    buyer: AuthUser,
) -> Result<Json<Value>, ApiError> {
    end(state, order_id, buyer, End::Cancel).await
}

async fn end(
    State(state): State<Arc<AppState>>,
    PathId(order_id): PathId,
    AuthUser(buyer): AuthUser,
    end: End,
) -> Result<Json<Value>, ApiError> {
    // Only `reserve` keeps a Redis stock: the others never wait on Redis here.
    let redis_stock = (state.kind == StrategyKind::Reserve).then_some(&state.ctx.redis);
    let ended = end_order(
        &state.ctx.db,
        redis_stock,
        order_id,
        end,
        Some(buyer),
        state.payment_timeout,
    )
    .await;
    // An overdue payment expires the order: its unit is back on sale too.
    let now = match &ended {
        Ok(order) | Err(TransitionError::NotPending(order)) => Some(order),
        Err(_) => None,
    };
    if let Some(order) = now.filter(|order| order.status.returns_stock()) {
        state.stock_returned(order.order.voucher_id);
    }
    Ok(Json(order_json(&ended?)))
}

/// `{"order_id","voucher_id","user_id","status","created_at"}`.
pub(crate) fn order_json(stored: &StoredOrder) -> Value {
    json!({
        "order_id": stored.order.id,
        "voucher_id": stored.order.voucher_id,
        "user_id": stored.order.user_id,
        "status": stored.status.as_str(),
        "created_at": rfc3339(stored.order.created_at),
    })
}

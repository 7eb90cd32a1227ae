//! `POST /vouchers/{id}/orders` (place an order) and `GET /vouchers/{id}/orders`.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::admin::{Guarded, Unauthorized, authorize};
use super::auth::AuthUser;
use super::error::ApiError;
use super::path_id::PathId;
use super::state::AppState;
use crate::db::OrderStatus;
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
        let placed = state.strategy.place(&state.ctx, voucher_id, user_id).await;
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

/// Most orders one page of `GET /vouchers/{id}/orders` holds.
pub(crate) const MAX_PAGE: u32 = 1_000;
/// Orders per page when `limit` is not given.
const DEFAULT_PAGE: u32 = 100;

/// The query of `GET /vouchers/{id}/orders`.
#[derive(Deserialize)]
pub(crate) struct Page {
    after: Option<i64>,
    limit: Option<u32>,
}

/// `GET /vouchers/{id}/orders[?after=ORDER_ID][&limit=N]` (the admin's) →
/// `{"count", "orders": [{"order_id", "user_id"}], "next"}`: how many orders
/// the voucher has, and up to N (100; at most 1,000; 0 for the count alone)
/// of them by order id after `ORDER_ID`; `next` is the `after` of the next
/// page, `null` on the last. 404 when the voucher does not exist.
pub async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    PathId(voucher_id): PathId,
    page: Result<Query<Page>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    // Who bought what is the shop's business, not every visitor's.
    authorize(&state.admin, &headers, Guarded::Admin).map_err(Unauthorized::into_api_error)?;
    let Query(page) = page
        .map_err(|_| ApiError::bad_request("after must be an order id and limit a whole number"))?;
    let limit = page.limit.unwrap_or(DEFAULT_PAGE);
    if limit > MAX_PAGE {
        return Err(ApiError::bad_request(format!(
            "limit is at most {MAX_PAGE}"
        )));
    }
    let db = &state.ctx.db;
    if db.find_voucher(voucher_id).await?.is_none() {
        return Err(ApiError::not_found());
    }
    let count = db.count_orders(voucher_id).await?;
    let orders = if limit == 0 {
        Vec::new()
    } else {
        db.list_orders_after(voucher_id, page.after.unwrap_or(i64::MIN), limit)
            .await?
    };
    let next = (orders.len() == limit as usize && limit > 0)
        .then(|| orders.last().map(|order| order.id))
        .flatten();
    let listed: Vec<Value> = orders
        .iter()
        .map(|order| json!({ "order_id": order.id, "user_id": order.user_id }))
        .collect();
    Ok(Json(
        json!({ "count": count, "orders": listed, "next": next }),
    ))
}

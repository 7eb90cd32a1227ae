//! `POST /vouchers`, `GET /vouchers` and `GET /vouchers/{id}`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::error_code::ErrorCode;
use super::path_id::PathId;
use super::state::AppState;
use crate::db::{NewVoucher, Voucher};

/// Most vouchers `GET /vouchers` lists: the newest ones.
pub(crate) const LIST_LIMIT: u32 = 100;

/// Longest title, in characters (the column is VARCHAR(200)).
const MAX_TITLE_CHARS: usize = 200;

/// The body of `POST /vouchers`.
#[derive(Deserialize)]
struct CreateVoucher {
    title: String,
    stock: i64,
    begin_at: String,
    end_at: String,
}

/// `POST /vouchers` `{"title","stock","begin_at","end_at"}` → 201 `{"id"}`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // JSON only: a browser sends a cross-site form or text/plain body
    // without asking first, but never application/json.
    if !is_json(&headers) {
        return Err(ApiError::with_message(
            ErrorCode::UnsupportedMediaType,
            "POST /vouchers takes Content-Type: application/json",
        ));
    }
    // A body that cannot be read (too large, cut off) still gets a JSON answer.
    let body = body.map_err(|rejection| {
        let code = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorCode::PayloadTooLarge
        } else {
            ErrorCode::BadRequest
        };
        ApiError::with_message(code, rejection.body_text())
    })?;
    let voucher = parse_new_voucher(&body)?;
    let id = state.ctx.db.insert_voucher(&voucher).await?;
    if let Err(error) = state
        .strategy
        .voucher_created(&state.ctx, id, voucher.stock)
        .await
    {
        // The voucher exists; the reserve strategy initialises its Redis
        // stock lazily on the first order instead.
        tracing::warn!(voucher_id = id, %error, "seckill: voucher created, Redis stock not set");
    }
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
}

/// Whether the body is declared `application/json` (parameters allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// `GET /vouchers/{id}` → the voucher, stock as the database has it.
pub async fn show(
    State(state): State<Arc<AppState>>,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    let voucher = state
        .ctx
        .db
        .find_voucher(id)
        .await?
        .ok_or_else(ApiError::not_found)?;
    Ok(Json(voucher_json(&voucher)))
}

/// `GET /vouchers` → `{"vouchers": [...]}`: the newest [`LIST_LIMIT`]
/// vouchers ordered by id (newest last), each as `GET /vouchers/{id}` shows it.
pub async fn list(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let vouchers = state.ctx.db.vouchers(LIST_LIMIT).await?;
    let listed: Vec<Value> = vouchers.iter().map(voucher_json).collect();
    Ok(Json(json!({ "vouchers": listed })))
}

fn voucher_json(voucher: &Voucher) -> Value {
    json!({
        "id": voucher.id,
        "title": voucher.title,
        "stock": voucher.stock,
        "begin_at": rfc3339(voucher.begin_at),
        "end_at": rfc3339(voucher.end_at),
    })
}

/// Times go out as RFC 3339 in UTC with milliseconds: `2025-06-01T10:00:00.000Z`.
pub(crate) fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Checks and converts a creation body; every refusal says what was wrong.
fn parse_new_voucher(body: &[u8]) -> Result<NewVoucher, ApiError> {
    let request: CreateVoucher = serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))?;
    let title = request.title.trim().to_owned();
    if title.is_empty() {
        return Err(ApiError::bad_request("title must not be empty"));
    }
    if title.chars().any(char::is_control) {
        // NUL is refused by PostgreSQL; escape codes would reach the
        // terminals and logs that show titles.
        return Err(ApiError::bad_request(
            "title must not contain control characters (NUL, escape codes, line breaks)",
        ));
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::bad_request(format!(
            "title must be at most {MAX_TITLE_CHARS} characters"
        )));
    }
    if request.stock < 0 {
        return Err(ApiError::bad_request("stock must not be negative"));
    }
    let begin_at = parse_time("begin_at", &request.begin_at)?;
    let end_at = parse_time("end_at", &request.end_at)?;
    if end_at <= begin_at {
        return Err(ApiError::bad_request("end_at must be after begin_at"));
    }
    Ok(NewVoucher {
        title,
        stock: request.stock,
        begin_at,
        end_at,
    })
}

fn parse_time(field: &str, text: &str) -> Result<DateTime<Utc>, ApiError> {
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|error| {
            ApiError::bad_request(format!(
                "{field} must be an RFC 3339 time such as 2025-06-01T10:00:00Z: {error}"
            ))
        })?
        .with_timezone(&Utc);
    // Stored as epoch milliseconds; keep to years a BIGINT and chrono agree on.
    if !(0..=253_402_300_799_000).contains(&at.timestamp_millis()) {
        return Err(ApiError::bad_request(format!(
            "{field} must be between 1970 and 9999"
        )));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &str) -> String {
        parse_new_voucher(body.as_bytes())
            .err()
            .and_then(|error| error.message)
            .unwrap_or_else(|| "accepted".to_owned())
    }

    const WINDOW: &str =
        r#""begin_at":"2025-01-01T00:00:00Z","end_at":"2025-01-02T00:00:00+08:00""#;

    #[test]
    fn accepts_a_good_voucher() {
        let voucher =
            parse_new_voucher(format!(r#"{{"title":" Tea ","stock":100,{WINDOW}}}"#).as_bytes())
                .unwrap();
        assert_eq!(voucher.title, "Tea");
        assert_eq!(voucher.stock, 100);
        assert_eq!(rfc3339(voucher.end_at), "2025-01-01T16:00:00.000Z");
    }

    #[test]
    fn refuses_bad_bodies_with_a_reason() {
        assert!(refusal("not json").contains("invalid JSON"));
        assert!(refusal(r#"{"title":"x","stock":1}"#).contains("missing field"));
        assert!(refusal(&format!(r#"{{"title":"x","stock":-1,{WINDOW}}}"#)).contains("negative"));
        assert!(refusal(&format!(r#"{{"title":"","stock":1,{WINDOW}}}"#)).contains("empty"));
        for control in [r"\u0000", r"\u001b[31m", r"a\nb"] {
            let body = format!(r#"{{"title":"x{control}","stock":1,{WINDOW}}}"#);
            assert!(refusal(&body).contains("control"), "{control}");
        }
        assert!(
            refusal(&format!(r#"{{"title":"x","stock":"1",{WINDOW}}}"#)).contains("invalid JSON")
        );
        let long = "x".repeat(201);
        assert!(refusal(&format!(r#"{{"title":"{long}","stock":1,{WINDOW}}}"#)).contains("200"));
        assert!(
            refusal(
                r#"{"title":"x","stock":1,"begin_at":"tomorrow","end_at":"2025-01-02T00:00:00Z"}"#
            )
            .contains("begin_at must be an RFC 3339")
        );
        assert!(
            refusal(r#"{"title":"x","stock":1,"begin_at":"2025-01-02T00:00:00Z","end_at":"2025-01-01T00:00:00Z"}"#)
                .contains("after")
        );
    }
}

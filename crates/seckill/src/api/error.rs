//! Errors as JSON responses: `{"error": code}` or `{"error": code, "message": text}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error_code::ErrorCode;
use crate::db::DbError;
use crate::lifecycle::TransitionError;
use crate::strategy::OrderError;

/// An error answer: a stable machine-readable code (which decides the
/// HTTP status) and an optional human-readable message.
#[derive(Debug)]
pub struct ApiError {
    /// The `error` field: `not_found`, `sold_out`, `bad_request`...
    pub code: ErrorCode,
    /// The `message` field, when there is one.
    pub message: Option<String>,
}

impl ApiError {
    /// `code`, with no message.
    pub fn new(code: ErrorCode) -> ApiError {
        ApiError {
            code,
            message: None,
        }
    }

    /// `code`, saying what happened.
    pub fn with_message(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: Some(message.into()),
        }
    }

    /// The HTTP status: the code's.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// 404 `not_found`.
    pub fn not_found() -> ApiError {
        ApiError::new(ErrorCode::NotFound)
    }

    /// 400 `bad_request` with what was wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::with_message(ErrorCode::BadRequest, message)
    }

    /// 400 `bad_user_id`: the `X-User-Id` header is missing or not a user id.
    pub fn bad_user_id(message: impl Into<String>) -> ApiError {
        ApiError::with_message(ErrorCode::BadUserId, message)
    }
}

impl From<DbError> for ApiError {
    fn from(error: DbError) -> ApiError {
        match error {
            DbError::Busy(message) => {
                tracing::warn!(%message, "seckill: database busy");
                ApiError::with_message(ErrorCode::DatabaseBusy, message)
            }
            other => {
                // The details are for the log: they name tables, columns,
                // constraints and sometimes values.
                tracing::error!(error = %other, "seckill: database failure");
                ApiError::with_message(
                    ErrorCode::DatabaseError,
                    "the database failed; the details are in the service's log",
                )
            }
        }
    }
}

impl From<OrderError> for ApiError {
    fn from(error: OrderError) -> ApiError {
        match error {
            OrderError::NotFound => ApiError::not_found(),
            OrderError::NotStarted => ApiError::new(ErrorCode::NotStarted),
            OrderError::Ended => ApiError::new(ErrorCode::Ended),
            OrderError::SoldOut => ApiError::new(ErrorCode::SoldOut),
            OrderError::AlreadyOrdered => ApiError::new(ErrorCode::AlreadyOrdered),
            OrderError::InProgress => ApiError::new(ErrorCode::InProgress),
            OrderError::Busy(message) => ApiError::with_message(ErrorCode::Busy, message),
            OrderError::LockLost(message) => {
                tracing::warn!(%message, "seckill: the user's lock was lost; nothing written");
                ApiError::with_message(ErrorCode::LockLost, message)
            }
            OrderError::Conflict(message) => ApiError::with_message(ErrorCode::Conflict, message),
            OrderError::Redis(message) => {
                tracing::warn!(%message, "seckill: redis failure");
                ApiError::with_message(ErrorCode::RedisUnavailable, message)
            }
            OrderError::Database(error) => ApiError::from(error),
        }
    }
}

impl From<TransitionError> for ApiError {
    fn from(error: TransitionError) -> ApiError {
        match error {
            TransitionError::NotFound => ApiError::not_found(),
            TransitionError::Forbidden => {
                ApiError::with_message(ErrorCode::Forbidden, "the order belongs to another user")
            }
            TransitionError::NotPending(order) => ApiError::with_message(
                ErrorCode::NotPending,
                format!("the order is {}", order.status),
            ),
            TransitionError::Database(error) => ApiError::from(error),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match self.message {
            Some(message) => json!({ "error": self.code.as_str(), "message": message }),
            None => json!({ "error": self.code.as_str() }),
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(seconds) = self.code.retry_after_seconds() {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names the scheme that would be accepted.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_503_says_when_to_retry() {
        for code in ErrorCode::ALL {
            let response = ApiError::new(code).into_response();
            let retry_after = response.headers().get(axum::http::header::RETRY_AFTER);
            if code.status() == StatusCode::SERVICE_UNAVAILABLE {
                assert!(retry_after.is_some(), "{code} has no Retry-After");
            }
        }
    }

    /// Every way an order can be refused answers with a code counted as a
    /// rejection reason (the docs test holds the docs to that list).
    #[test]
    fn every_order_refusal_is_a_rejection_reason() {
        let refusals = [
            OrderError::NotFound,
            OrderError::NotStarted,
            OrderError::Ended,
            OrderError::SoldOut,
            OrderError::AlreadyOrdered,
            OrderError::InProgress,
            OrderError::Busy("held".to_owned()),
            OrderError::LockLost("lapsed".to_owned()),
            OrderError::Conflict("changed".to_owned()),
            OrderError::Redis("down".to_owned()),
            OrderError::Database(DbError::Busy("locked".to_owned())),
            OrderError::Database(DbError::Other(sqlx::Error::PoolClosed)),
        ];
        for refusal in refusals {
            let described = refusal.to_string();
            let code = ApiError::from(refusal).code;
            assert!(code.refuses_orders(), "{described} answers {code}");
        }
    }
}

//! Errors as JSON responses: `{"error": code}` or `{"error": code, "message": text}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::db::DbError;
use crate::lifecycle::TransitionError;
use crate::strategy::OrderError;

/// An error answer: a status, a stable machine-readable code, and an
/// optional human-readable message.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `error` field: `not_found`, `sold_out`, `bad_request`...
    pub code: &'static str,
    /// The `message` field, when there is one.
    pub message: Option<String>,
}

impl ApiError {
    /// 404 `not_found`.
    pub fn not_found() -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: None,
        }
    }

    /// 400 `bad_request` with what was wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: Some(message.into()),
        }
    }

    /// 400 `bad_user_id`: the `X-User-Id` header is missing or not a user id.
    pub fn bad_user_id(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_user_id",
            message: Some(message.into()),
        }
    }
}

impl From<DbError> for ApiError {
    fn from(error: DbError) -> ApiError {
        match error {
            DbError::Busy(message) => {
                tracing::warn!(%message, "seckill: database busy");
                ApiError {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    code: "database_busy",
                    message: Some(message),
                }
            }
            other => {
                tracing::error!(error = %other, "seckill: database failure");
                ApiError {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    code: "database_error",
                    message: Some(other.to_string()),
                }
            }
        }
    }
}

impl From<OrderError> for ApiError {
    fn from(error: OrderError) -> ApiError {
        let answer = |status, code| ApiError {
            status,
            code,
            message: None,
        };
        match error {
            OrderError::NotFound => ApiError::not_found(),
            OrderError::NotStarted => answer(StatusCode::FORBIDDEN, "not_started"),
            OrderError::Ended => answer(StatusCode::FORBIDDEN, "ended"),
            OrderError::SoldOut => answer(StatusCode::GONE, "sold_out"),
            OrderError::AlreadyOrdered => answer(StatusCode::CONFLICT, "already_ordered"),
            OrderError::InProgress => answer(StatusCode::CONFLICT, "in_progress"),
            OrderError::Busy(message) => ApiError {
                message: Some(message),
                ..answer(StatusCode::SERVICE_UNAVAILABLE, "busy")
            },
            OrderError::LockLost(message) => {
                tracing::warn!(%message, "seckill: the user's lock was lost; nothing written");
                ApiError {
                    message: Some(message),
                    ..answer(StatusCode::SERVICE_UNAVAILABLE, "lock_lost")
                }
            }
            OrderError::Conflict(message) => ApiError {
                message: Some(message),
                ..answer(StatusCode::CONFLICT, "conflict")
            },
            OrderError::Redis(message) => {
                tracing::warn!(%message, "seckill: redis failure");
                ApiError {
                    message: Some(message),
                    ..answer(StatusCode::SERVICE_UNAVAILABLE, "redis_unavailable")
                }
            }
            OrderError::Database(error) => ApiError::from(error),
        }
    }
}

impl From<TransitionError> for ApiError {
    fn from(error: TransitionError) -> ApiError {
        match error {
            TransitionError::NotFound => ApiError::not_found(),
            TransitionError::Forbidden => ApiError {
                status: StatusCode::FORBIDDEN,
                code: "forbidden",
                message: Some("the order belongs to another user".to_owned()),
            },
            TransitionError::NotPending(order) => ApiError {
                status: StatusCode::CONFLICT,
                code: "not_pending",
                message: Some(format!("the order is {}", order.status)),
            },
            TransitionError::Database(error) => ApiError::from(error),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.message {
            Some(message) => json!({ "error": self.code, "message": message }),
            None => json!({ "error": self.code }),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names the scheme that would be accepted.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

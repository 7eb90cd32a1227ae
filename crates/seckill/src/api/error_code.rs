//! Every error code the API answers with, and its HTTP status: one list,
//! which the docs test (`tests/service/docs.rs`) holds the README's status
//! table and the metrics docs to.

use axum::http::StatusCode;

/// The `error` field of an error answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: a malformed body or parameter.
    BadRequest,
    /// 400: `X-User-Id` missing or not a user id.
    BadUserId,
    /// 400: `Idempotency-Key` empty, too long, repeated or not visible ASCII.
    BadIdempotencyKey,
    /// 401: no valid credential (JWT, admin token).
    Unauthorized,
    /// 403: someone else's order, or a browser request from another site.
    Forbidden,
    /// 403: the sale has not started.
    NotStarted,
    /// 403: the sale is over.
    Ended,
    /// 404: nothing at that path.
    NotFound,
    /// 405: the path exists, the method does not.
    MethodNotAllowed,
    /// 409: the user already has an order of the voucher.
    AlreadyOrdered,
    /// 409: an earlier request (the user's lock, the same idempotency key)
    /// is still running.
    InProgress,
    /// 409: an optimistic write found the voucher changed since its read.
    Conflict,
    /// 409: the order is no longer pending.
    NotPending,
    /// 410: no stock left.
    SoldOut,
    /// 413: the body is over the size limit.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: an idempotency key reused for another request.
    IdempotencyKeyReused,
    /// 429: over the user's rate limit.
    RateLimited,
    /// 500: the database failed.
    DatabaseError,
    /// 500: the service failed otherwise.
    InternalError,
    /// 503: the user's lock stayed held for `--lock-wait`.
    Busy,
    /// 503: the user's lock was lost before the write.
    LockLost,
    /// 503: Redis did not answer.
    RedisUnavailable,
    /// 503: the database is busy (no connection, lock timeout, deadlock).
    DatabaseBusy,
    /// 503: the instance works on `--max-in-flight` requests already.
    Overloaded,
}

impl ErrorCode {
    /// Every code, by status.
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::BadRequest,
        ErrorCode::BadUserId,
        ErrorCode::BadIdempotencyKey,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotStarted,
        ErrorCode::Ended,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::AlreadyOrdered,
        ErrorCode::InProgress,
        ErrorCode::Conflict,
        ErrorCode::NotPending,
        ErrorCode::SoldOut,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::IdempotencyKeyReused,
        ErrorCode::RateLimited,
        ErrorCode::DatabaseError,
        ErrorCode::InternalError,
        ErrorCode::Busy,
        ErrorCode::LockLost,
        ErrorCode::RedisUnavailable,
        ErrorCode::DatabaseBusy,
        ErrorCode::Overloaded,
    ];

    /// The code as answered: `sold_out`, `not_found`...
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::BadUserId => "bad_user_id",
            ErrorCode::BadIdempotencyKey => "bad_idempotency_key",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotStarted => "not_started",
            ErrorCode::Ended => "ended",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::AlreadyOrdered => "already_ordered",
            ErrorCode::InProgress => "in_progress",
            ErrorCode::Conflict => "conflict",
            ErrorCode::NotPending => "not_pending",
            ErrorCode::SoldOut => "sold_out",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::DatabaseError => "database_error",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::Busy => "busy",
            ErrorCode::LockLost => "lock_lost",
            ErrorCode::RedisUnavailable => "redis_unavailable",
            ErrorCode::DatabaseBusy => "database_busy",
            ErrorCode::Overloaded => "overloaded",
        }
    }

    /// The HTTP status it is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest | ErrorCode::BadUserId | ErrorCode::BadIdempotencyKey => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden | ErrorCode::NotStarted | ErrorCode::Ended => {
                StatusCode::FORBIDDEN
            }
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::AlreadyOrdered
            | ErrorCode::InProgress
            | ErrorCode::Conflict
            | ErrorCode::NotPending => StatusCode::CONFLICT,
            ErrorCode::SoldOut => StatusCode::GONE,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::DatabaseError | ErrorCode::InternalError => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ErrorCode::Busy
            | ErrorCode::LockLost
            | ErrorCode::RedisUnavailable
            | ErrorCode::DatabaseBusy
            | ErrorCode::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The `Retry-After` of a 503, in seconds: a lock held or lost clears
    /// within about a second; an unavailable Redis or database is an outage,
    /// so clients wait about one response timeout (3 s) before trying again
    /// rather than piling retries onto it.
    pub fn retry_after_seconds(self) -> Option<u64> {
        match self {
            ErrorCode::Busy | ErrorCode::LockLost | ErrorCode::Overloaded => Some(1),
            ErrorCode::RedisUnavailable | ErrorCode::DatabaseBusy => Some(3),
            _ => None,
        }
    }

    /// Whether a refusal with this code stays true for the same request, so
    /// an idempotency key may keep it: bad input, someone else's order, a
    /// sale that ended, a user who has their order, an order that ended.
    /// The others can change (the sale opens, stock comes back, a voucher
    /// is created, a lock is freed) and are not kept.
    pub fn stays_true(self) -> bool {
        matches!(
            self,
            ErrorCode::BadRequest
                | ErrorCode::BadUserId
                | ErrorCode::Forbidden
                | ErrorCode::Ended
                | ErrorCode::AlreadyOrdered
                | ErrorCode::NotPending
                | ErrorCode::PayloadTooLarge
                | ErrorCode::UnsupportedMediaType
        )
    }

    /// The code answered as `text`, if it is one.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == text)
    }

    /// Whether `POST /vouchers/{id}/orders` can refuse an order with it,
    /// and so whether it is a `reason` of `seckill_order_rejections_total`.
    /// (Refusals made before the handler runs, by the rate limit and the
    /// idempotency guard, have series of their own or none.)
    pub fn refuses_orders(self) -> bool {
        matches!(
            self,
            ErrorCode::BadUserId
                | ErrorCode::Unauthorized
                | ErrorCode::NotStarted
                | ErrorCode::Ended
                | ErrorCode::NotFound
                | ErrorCode::AlreadyOrdered
                | ErrorCode::InProgress
                | ErrorCode::Conflict
                | ErrorCode::SoldOut
                | ErrorCode::DatabaseError
                | ErrorCode::Busy
                | ErrorCode::LockLost
                | ErrorCode::RedisUnavailable
                | ErrorCode::DatabaseBusy
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

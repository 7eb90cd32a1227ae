//! `Idempotency-Key: K` on a POST: the same caller sending the same key
//! within 24 h gets the first answer again (status and body, plus
//! `Idempotent-Replayed: true`), and the work is done once.
//!
//! The record lives in Redis, so every instance sees it:
//! `{seckill}:idem:{caller}:{sha256(K)}` is claimed with `SET NX EX 300`
//! before the handler runs, and holds the answer for 24 h afterwards.
//!
//! Only identified callers get records, and only on the API's routes: the
//! caller is `user:{id}` when the request names a user (a valid JWT, or
//! `X-User-Id` in header mode), else, on `POST /vouchers` and `/admin/*`,
//! `admin` when it passes the admin check (the admin token, or a loopback
//! instance without one). A key sent by
//! anyone else, to an unknown path, or with a path over 256 bytes is
//! ignored: the request runs as without it, so nobody can fill Redis
//! without signing in.
//!
//! | case | answer |
//! |---|---|
//! | key not 1..=200 visible ASCII characters, or sent twice | 400 `bad_idempotency_key` |
//! | the first request with the key is still running | 409 `in_progress` |
//! | the key was used for another method or path | 422 `idempotency_key_reused` |
//! | Redis cannot be reached | 503 `redis_unavailable` (the handler does not run) |
//! | the caller claimed `--idempotency-keys-per-day` new keys (1000) since its first of the day | 429 `rate_limited` + `Retry-After` (nothing runs) |
//! | first answer was 2xx, or a refusal that stays true (400 `bad_request` / `bad_user_id`, 403 `forbidden` / `ended`, 409 `already_ordered` / `not_pending`, 413) | kept, replayed |
//! | any other answer (`not_started`, `sold_out`, `not_found`, `in_progress`, 401, 429, 5xx...: it may change) | not kept: a retry runs again |
//! | the answer could not be stored with the key | 500 `internal_error` |
//!
//! An instance that dies while running the handler leaves the key claimed:
//! retries get 409 `in_progress` until the claim's 5 minutes pass, then run.
//! A first request that did its work but died before its answer was kept
//! is therefore run again by such a retry: the order strategies refuse a
//! second order of the user (409 `already_ordered`), pay and cancel a second
//! change (409 `not_pending`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::admin::{Guarded, authorize};
use super::auth::known_user;
use super::error::ApiError;
use super::error_code::ErrorCode;
use super::state::AppState;

/// The request header carrying the key.
pub const KEY_HEADER: &str = "idempotency-key";
/// The answer header marking a replayed answer.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// How long a key and its answer are kept, in seconds.
pub const TTL_SECONDS: u64 = 24 * 60 * 60;
/// Longest key, in characters.
pub const MAX_KEY_CHARS: usize = 200;
/// Largest answer body kept (the API's answers are small JSON documents).
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// How long a claim lasts while its handler runs, in seconds: an instance
/// that dies mid-request blocks the key this long, not for 24 h. A handler
/// is bounded well below it (database and Redis timeouts of seconds).
pub const CLAIM_TTL_SECONDS: u64 = 5 * 60;
/// Longest path a record is kept for: the API's own paths are far shorter.
const MAX_PATH_BYTES: usize = 256;
/// Tries at claiming a key that vanishes (expires) between SET and GET.
const CLAIM_TRIES: usize = 3;

/// What Redis holds for a key: the request it was claimed for and, once
/// the handler answered, the answer.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct Record {
    method: String,
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer: Option<Answer>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    body: String,
}

/// The middleware (`axum::middleware::from_fn_with_state`), for every route.
pub async fn guard(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let key = match client_key(request.headers()) {
        Ok(None) => return next.run(request).await,
        Ok(Some(key)) => key,
        Err(error) => return error.into_response(),
    };
    if request.uri().path().len() > MAX_PATH_BYTES {
        return next.run(request).await;
    }
    let Some(caller) = caller(&state, &mut request) else {
        // Unidentified: no record, so strangers cannot fill Redis; the
        // handler refuses them (401, 400) or does what anyone may.
        return next.run(request).await;
    };
    let redis_key = format!(
        "{{seckill}}:idem:{caller}:{}",
        hex(&Sha256::digest(key.as_bytes()))
    );
    let claim = Record {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        answer: None,
    };
    let mut conn = state.ctx.redis.clone();
    match claim_key(&mut conn, &redis_key, &claim).await {
        Ok(None) => {}
        Ok(Some(earlier)) => return earlier_answer(earlier, &claim),
        Err(error) => return redis_unavailable(error),
    }
    match count_new_key(&mut conn, &caller, state.idempotency_keys_per_day).await {
        Ok(None) => {}
        Ok(Some(retry_after)) => {
            release(&mut conn, &redis_key).await;
            return over_the_daily_keys(state.idempotency_keys_per_day, retry_after);
        }
        Err(error) => {
            release(&mut conn, &redis_key).await;
            return redis_unavailable(error);
        }
    }
    let response = next.run(request).await;
    settle(&mut conn, &redis_key, claim, response).await
}

/// The request's key: `None` without the header.
fn client_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(KEY_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let bad =
        |message: &str| ApiError::with_message(ErrorCode::BadIdempotencyKey, message.to_owned());
    if values.next().is_some() {
        return Err(bad("send one Idempotency-Key header, not several"));
    }
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY_CHARS || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(bad(&format!(
            "Idempotency-Key must be 1 to {MAX_KEY_CHARS} visible ASCII characters"
        )));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// Whose key it is (keys of different callers never meet); `None` for a
/// caller neither a user nor the admin.
fn caller(state: &AppState, request: &mut Request) -> Option<String> {
    if let Some(user) = known_user(&state.auth, request) {
        return Some(format!("user:{user}"));
    }
    // The admin is known on the admin's routes only.
    let path = request.uri().path();
    let admin_route = path == "/vouchers" || path.starts_with("/admin/");
    (admin_route && authorize(&state.admin, request.headers(), Guarded::Admin).is_ok())
        .then(|| "admin".to_owned())
}

/// Claims `key` for `claim`: `None` when it is ours now, else what an
/// earlier request left there.
async fn claim_key(
    conn: &mut redlatch::RedisConnection,
    key: &str,
    claim: &Record,
) -> Result<Option<Record>, redis::RedisError> {
    let value = serde_json::to_string(claim).expect("a record serializes");
    for _ in 0..CLAIM_TRIES {
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&value)
            .arg("NX")
            .arg("EX")
            .arg(CLAIM_TTL_SECONDS)
            .query_async(conn)
            .await?;
        if set.is_some() {
            return Ok(None);
        }
        let earlier: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
        if let Some(earlier) = earlier {
            return serde_json::from_str(&earlier).map(Some).map_err(|error| {
                redis::RedisError::from((
                    redis::ErrorKind::Parse,
                    "unreadable idempotency record",
                    error.to_string(),
                ))
            });
        }
        // It expired or was released between the two calls: claim again.
    }
    // Claimed and released over and over: others are busy with this key.
    Ok(Some(claim.clone()))
}

/// The answer to a request whose key was already claimed.
fn earlier_answer(earlier: Record, claim: &Record) -> Response {
    if earlier.method != claim.method || earlier.path != claim.path {
        return ApiError::with_message(
            ErrorCode::IdempotencyKeyReused,
            format!(
                "this Idempotency-Key was used for {} {}",
                earlier.method, earlier.path
            ),
        )
        .into_response();
    }
    let Some(answer) = earlier.answer else {
        return ApiError::with_message(
            ErrorCode::InProgress,
            "a request with this Idempotency-Key is still being handled".to_owned(),
        )
        .into_response();
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    if let Some(content_type) = answer
        .content_type
        .and_then(|text| HeaderValue::from_str(&text).ok())
    {
        headers.insert(header::CONTENT_TYPE, content_type);
    }
    headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

/// Keeps the handler's answer under the key, or releases the key when the
/// answer says nothing was done.
async fn settle(
    conn: &mut redlatch::RedisConnection,
    key: &str,
    claim: Record,
    response: Response,
) -> Response {
    let status = response.status();
    if !status.is_success() && !status.is_client_error() {
        release(conn, key).await;
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = match axum::body::to_bytes(body, MAX_ANSWER_BYTES).await {
        Ok(body) => body,
        Err(error) => {
            tracing::error!(%error, "seckill: an answer could not be read for its idempotency key");
            let _ = redis::cmd("DEL").arg(key).query_async::<i64>(conn).await;
            return ApiError::with_message(
                ErrorCode::InternalError,
                "the answer could not be kept for its Idempotency-Key".to_owned(),
            )
            .into_response();
        }
    };
    if status.is_client_error() && !stays_true(&body) {
        release(conn, key).await;
        return Response::from_parts(parts, Body::from(body));
    }
    let record = Record {
        answer: Some(Answer {
            status: status.as_u16(),
            content_type: parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            body: String::from_utf8_lossy(&body).into_owned(),
        }),
        ..claim
    };
    let value = serde_json::to_string(&record).expect("a record serializes");
    // XX: only over our own claim; the 24 h count from the answer.
    let kept: Result<Option<String>, _> = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("XX")
        .arg("EX")
        .arg(TTL_SECONDS)
        .query_async(conn)
        .await;
    if let Err(error) = kept {
        // The work is done; the key stays claimed, so it is not done twice.
        tracing::warn!(%error, "seckill: could not keep an answer for its idempotency key");
    }
    Response::from_parts(parts, Body::from(body))
}

/// Counts a key newly claimed by `caller` against its `per_day`: `None`
/// while within it, else the seconds until the count starts again.
async fn count_new_key(
    conn: &mut redlatch::RedisConnection,
    caller: &str,
    per_day: u64,
) -> Result<Option<u64>, redis::RedisError> {
    let counter = format!("{{seckill}}:idem-count:{caller}");
    // The day starts at the caller's first key: EXPIRE NX keeps it.
    let (count, ttl): (u64, i64) = redis::pipe()
        .atomic()
        .incr(&counter, 1)
        .cmd("EXPIRE")
        .arg(&counter)
        .arg(TTL_SECONDS)
        .arg("NX")
        .ignore()
        .ttl(&counter)
        .query_async(conn)
        .await?;
    Ok((count > per_day).then(|| ttl.max(1).unsigned_abs()))
}

/// 429 `rate_limited`: the caller used its keys of the day.
fn over_the_daily_keys(per_day: u64, retry_after: u64) -> Response {
    let mut response = ApiError::with_message(
        ErrorCode::RateLimited,
        format!(
            "at most {per_day} new Idempotency-Keys a day per caller; try again in {retry_after} s"
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// Whether a 4xx answer's `error` code is one that stays true.
fn stays_true(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|answer| answer["error"].as_str().and_then(ErrorCode::parse))
        .is_some_and(ErrorCode::stays_true)
}

/// Frees the key: the answer may change, so a retry runs again.
async fn release(conn: &mut redlatch::RedisConnection, key: &str) {
    if let Err(error) = redis::cmd("DEL").arg(key).query_async::<i64>(conn).await {
        // The key stays claimed: retries get 409 in_progress until it expires.
        tracing::warn!(%error, "seckill: could not release an idempotency key");
    }
}

fn redis_unavailable(error: redis::RedisError) -> Response {
    tracing::warn!(%error, "seckill: redis failure (idempotency key)");
    ApiError::with_message(
        ErrorCode::RedisUnavailable,
        format!("idempotency keys need Redis: {error}"),
    )
    .into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(value: &[u8]) -> Result<Option<String>, &'static str> {
        let mut headers = HeaderMap::new();
        headers.insert(KEY_HEADER, HeaderValue::from_bytes(value).unwrap());
        client_key(&headers).map_err(|error| error.code.as_str())
    }

    #[test]
    fn keys_are_one_to_200_visible_ascii_characters() {
        assert_eq!(client_key(&HeaderMap::new()).unwrap(), None);
        assert_eq!(key_of(b"order-1").unwrap().as_deref(), Some("order-1"));
        let longest = "k".repeat(200);
        assert_eq!(key_of(longest.as_bytes()).unwrap(), Some(longest));
        for bad in [
            &b""[..],
            b"two words",
            b"tab\there",
            &[b'k'; 201],
            "caf\u{e9}".as_bytes(),
        ] {
            assert_eq!(key_of(bad), Err("bad_idempotency_key"), "{bad:?}");
        }
        let mut twice = HeaderMap::new();
        twice.append(KEY_HEADER, HeaderValue::from_static("a"));
        twice.append(KEY_HEADER, HeaderValue::from_static("b"));
        assert_eq!(
            client_key(&twice).unwrap_err().code.as_str(),
            "bad_idempotency_key"
        );
    }

    #[test]
    fn only_refusals_that_stay_true_are_kept() {
        let body = |code: &str| format!(r#"{{"error":"{code}"}}"#).into_bytes();
        for kept in ["already_ordered", "not_pending", "bad_request", "ended"] {
            assert!(stays_true(&body(kept)), "{kept}");
        }
        for changes in [
            "not_started",
            "sold_out",
            "not_found",
            "in_progress",
            "unauthorized",
        ] {
            assert!(!stays_true(&body(changes)), "{changes}");
        }
        assert!(!stays_true(b"not json"));
    }

    #[test]
    fn an_earlier_answer_is_replayed_in_progress_or_refused() {
        let claim = Record {
            method: "POST".to_owned(),
            path: "/vouchers/1/orders".to_owned(),
            answer: None,
        };
        assert_eq!(
            earlier_answer(claim.clone(), &claim).status(),
            StatusCode::CONFLICT
        );
        let elsewhere = Record {
            path: "/vouchers/2/orders".to_owned(),
            ..claim.clone()
        };
        assert_eq!(
            earlier_answer(elsewhere, &claim).status(),
            StatusCode::UNPROCESSABLE_ENTITY
        );
        let done = Record {
            answer: Some(Answer {
                status: 201,
                content_type: Some("application/json".to_owned()),
                body: r#"{"order_id":5}"#.to_owned(),
            }),
            ..claim.clone()
        };
        let replay = earlier_answer(done, &claim);
        assert_eq!(replay.status(), StatusCode::CREATED);
        assert_eq!(replay.headers()[REPLAYED_HEADER], "true");
        assert_eq!(replay.headers()[header::CONTENT_TYPE], "application/json");
    }
}

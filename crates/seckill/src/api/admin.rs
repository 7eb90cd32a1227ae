//! The admin check: who may use `POST /vouchers` and the admin routes
//! (`dead_letters.rs`).
//!
//! Access ([`authorize`], the one check):
//!
//! - `--admin-token T` given: `POST /vouchers` and every `/admin/*` route need
//!   `Authorization: Bearer T`; otherwise 401 `unauthorized` with
//!   `WWW-Authenticate: Bearer`. The token is compared in constant time
//!   (the time depends on the configured token's length only).
//! - No token: `POST /vouchers` and `/admin/*` answer only when the instance
//!   listens on a loopback address (127.0.0.1, ::1), where only local
//!   processes reach them; on any other address they answer 401, so an
//!   instance exposed to a network (`--auth jwt` on 0.0.0.0) never lets
//!   anyone create vouchers or replay dead letters by default.
//!
//! Browsers on other sites are kept out of these routes (and every POST) by
//! the same-origin check (`same_origin.rs`), and `POST /vouchers` takes
//! JSON only, so a cross-site form cannot post one.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::error_code::ErrorCode;

/// Who may use the admin routes.
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    /// `--admin-token`: the bearer token, when set.
    pub token: Option<String>,
    /// Whether the instance listens on a loopback address (admin routes are
    /// open there when no token is set).
    pub loopback: bool,
}

/// What a request asks for, for [`authorize`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guarded {
    /// `POST /vouchers`: needs the token when one is set, a loopback
    /// listen address when none is.
    Write,
    /// `/admin/*`: needs the token when one is set, a loopback listen
    /// address when none is.
    Admin,
}

/// The one access check of `POST /vouchers` and `/admin/*`.
pub(crate) fn authorize(
    access: &AdminAccess,
    headers: &HeaderMap,
    guarded: Guarded,
) -> Result<(), Unauthorized> {
    match (&access.token, guarded) {
        (Some(token), _) => match bearer(headers) {
            Some(given) if same_secret(given.as_bytes(), token.as_bytes()) => Ok(()),
            Some(_) => Err(Unauthorized("the bearer token is not the admin token")),
            None => Err(Unauthorized("needs Authorization: Bearer <admin token>")),
        },
        (None, _) if access.loopback => Ok(()),
        (None, Guarded::Write) => Err(Unauthorized(
            "creating vouchers needs --admin-token on a non-loopback listen address",
        )),
        (None, Guarded::Admin) => Err(Unauthorized(
            "admin routes need --admin-token on a non-loopback listen address",
        )),
    }
}

/// The token of `Authorization: Bearer TOKEN` (scheme case-insensitive).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// Compares without stopping at the first difference: the time taken
/// depends on `expected`'s length only, not on how much of it was guessed.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut differ = usize::from(given.len() != expected.len());
    for (at, byte) in expected.iter().enumerate() {
        let other = given.get(at).copied().unwrap_or(!byte);
        differ |= usize::from(other ^ byte);
    }
    std::hint::black_box(differ) == 0
}

/// 401 `unauthorized`, with `WWW-Authenticate: Bearer`.
#[derive(Debug)]
pub(crate) struct Unauthorized(&'static str);

impl Unauthorized {
    /// As an [`ApiError`] (401 `unauthorized`, which carries
    /// `WWW-Authenticate: Bearer` too).
    pub(crate) fn into_api_error(self) -> ApiError {
        ApiError::with_message(ErrorCode::Unauthorized, self.0.to_owned())
    }
}

impl IntoResponse for Unauthorized {
    fn into_response(self) -> Response {
        let mut response =
            ApiError::with_message(ErrorCode::Unauthorized, self.0.to_owned()).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        response
    }
}

/// Middleware of `POST /vouchers`; its state is the instance's access alone.
pub(crate) async fn guard_writes(
    State(access): State<AdminAccess>,
    request: Request,
    next: Next,
) -> Response {
    match authorize(&access, request.headers(), Guarded::Write) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// Middleware of `/admin/*`.
pub(crate) async fn guard_admin(
    State(access): State<AdminAccess>,
    request: Request,
    next: Next,
) -> Response {
    match authorize(&access, request.headers(), Guarded::Admin) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(header::AUTHORIZATION, value.parse().expect("header"));
        }
        headers
    }

    #[test]
    fn secrets_compare_by_content_and_length() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cres", b"s3cret"));
        assert!(!same_secret(b"s3cre", b"s3cret"));
        assert!(!same_secret(b"s3cret!", b"s3cret"));
        assert!(!same_secret(b"", b"s3cret"));
    }

    #[test]
    fn a_set_token_guards_writes_and_admin() {
        let access = AdminAccess {
            token: Some("s3cret".to_owned()),
            loopback: true,
        };
        for guarded in [Guarded::Write, Guarded::Admin] {
            assert!(authorize(&access, &headers(None), guarded).is_err());
            assert!(authorize(&access, &headers(Some("Bearer nope")), guarded).is_err());
            assert!(authorize(&access, &headers(Some("Basic s3cret")), guarded).is_err());
            assert!(authorize(&access, &headers(Some("Bearer s3cret")), guarded).is_ok());
            assert!(authorize(&access, &headers(Some("bearer s3cret")), guarded).is_ok());
        }
    }

    #[test]
    fn without_a_token_writes_and_admin_are_loopback_only() {
        let local = AdminAccess {
            token: None,
            loopback: true,
        };
        let exposed = AdminAccess {
            token: None,
            loopback: false,
        };
        for guarded in [Guarded::Write, Guarded::Admin] {
            assert!(authorize(&local, &headers(None), guarded).is_ok());
            assert!(authorize(&exposed, &headers(None), guarded).is_err());
        }
    }
}

//! Who the user is: `--auth header` (the `X-User-Id` header, trusted as
//! sent: for the lab, the demo and tests, on a loopback address only) or
//! `--auth jwt` (`Authorization: Bearer <JWT>`, HS256 with `--jwt-secret`,
//! the user id in `sub`).
//!
//! Handlers take [`AuthUser`]: `AuthUser(user_id): AuthUser`, or
//! `Result<AuthUser, ApiError>` to answer the refusal themselves. In jwt
//! mode a refusal is 401 `unauthorized` with `WWW-Authenticate: Bearer`; in
//! header mode a missing or bad header is 400 `bad_user_id`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::error_code::ErrorCode;
use super::user_id::user_id;

/// The shortest `--jwt-secret` accepted: HS256's own key size, 256 bits.
pub const MIN_SECRET_BYTES: usize = 32;

/// `--auth`: how requests say who the user is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthKind {
    /// The `X-User-Id` header, believed as sent: loopback addresses only.
    #[default]
    Header,
    /// `Authorization: Bearer <JWT>` signed HS256 with `--jwt-secret`.
    Jwt,
}

/// How an instance authenticates users (part of
/// [`ServiceConfig`](crate::serve::ServiceConfig)).
#[derive(Clone, Default, PartialEq, Eq)]
pub enum AuthConfig {
    /// `X-User-Id`; the instance refuses to start on a non-loopback address.
    #[default]
    Header,
    /// HS256 JWTs signed with this secret.
    Jwt {
        /// The shared HMAC secret (not empty).
        secret: String,
    },
}

impl fmt::Debug for AuthConfig {
    // Hand-written: the secret never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthConfig::Header => f.write_str("Header"),
            AuthConfig::Jwt { .. } => f.write_str("Jwt { secret: <redacted> }"),
        }
    }
}

/// The checked form of an [`AuthConfig`], kept in the shared state (`api/state.rs`).
pub enum Auth {
    /// `X-User-Id`.
    Header,
    /// HS256 JWTs.
    Jwt {
        /// The secret as a verification key.
        key: DecodingKey,
        /// HS256 only, `exp` required.
        validation: Box<Validation>,
    },
}

impl Auth {
    /// Checks `config` against the address the instance listens on.
    ///
    /// # Errors
    /// Header mode on a non-loopback address (anyone could claim any user),
    /// or a JWT secret shorter than [`MIN_SECRET_BYTES`].
    pub fn new(config: &AuthConfig, listen: SocketAddr) -> Result<Auth, String> {
        match config {
            AuthConfig::Header if !listen.ip().is_loopback() => Err(format!(
                "--auth header believes any X-User-Id a client sends, so it only listens on \
                 a loopback address; {listen} is not one: use --auth jwt --jwt-secret S \
                 (or listen on 127.0.0.1)"
            )),
            AuthConfig::Header => Ok(Auth::Header),
            AuthConfig::Jwt { secret } if secret.len() < MIN_SECRET_BYTES => Err(format!(
                "--jwt-secret is {} bytes long; HS256 needs at least {MIN_SECRET_BYTES} \
                 (a shorter one can be guessed offline from any token)",
                secret.len()
            )),
            AuthConfig::Jwt { secret } => {
                let mut validation = Validation::new(Algorithm::HS256);
                // exp is required (the library's default) and checked with
                // 60 s of leeway for clock skew; nbf is checked when present.
                validation.validate_nbf = true;
                // No audience is configured: a token's `aud` is not judged.
                validation.validate_aud = false;
                Ok(Auth::Jwt {
                    key: DecodingKey::from_secret(secret.as_bytes()),
                    validation: Box::new(validation),
                })
            }
        }
    }

    /// The user a request's headers name.
    ///
    /// # Errors
    /// 400 `bad_user_id` (header mode) or 401 `unauthorized` (jwt mode),
    /// with what was wrong.
    pub fn user(&self, headers: &HeaderMap) -> Result<i64, ApiError> {
        match self {
            Auth::Header => user_id(headers),
            Auth::Jwt { key, validation } => jwt_user(headers, key, validation),
        }
    }
}

/// The authenticated user of a request, as an extractor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthUser(pub i64);

// Over any state that holds an `Auth` (the instance's `AppState`), so this
// file need not import the state that holds it.
impl<S: AsRef<Auth> + Send + Sync> FromRequestParts<Arc<S>> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<S>) -> Result<AuthUser, ApiError> {
        // A middleware that ran first (idempotency, rate limit) may have
        // authenticated the request already.
        if let Some(user) = parts.extensions.get::<AuthUser>() {
            return Ok(*user);
        }
        let user = AuthUser((**state).as_ref().user(&parts.headers)?);
        parts.extensions.insert(user);
        Ok(user)
    }
}

/// The user of `parts` for a middleware: `None` when the request names none
/// (the handler then gives the refusal). Remembered in the extensions.
pub(crate) fn known_user(auth: &Auth, request: &mut Request) -> Option<i64> {
    if let Some(AuthUser(user)) = request.extensions().get::<AuthUser>() {
        return Some(*user);
    }
    let user = auth.user(request.headers()).ok()?;
    request.extensions_mut().insert(AuthUser(user));
    Some(user)
}

/// 401 `unauthorized`; the answer carries `WWW-Authenticate: Bearer`
/// ([`ApiError`]'s response adds it to every 401).
pub fn unauthorized(message: impl Into<String>) -> ApiError {
    ApiError::with_message(ErrorCode::Unauthorized, message.into())
}

/// The claims read from a token; `exp` and `nbf` are checked by the library.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Value,
}

fn jwt_user(
    headers: &HeaderMap,
    key: &DecodingKey,
    validation: &Validation,
) -> Result<i64, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| unauthorized("the Authorization header is missing"))?
        .to_str()
        .map_err(|_| unauthorized("the Authorization header is not text"))?;
    let token = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => {
            return Err(unauthorized(
                "the Authorization header is not `Bearer <JWT>`",
            ));
        }
    };
    let claims = jsonwebtoken::decode::<Claims>(token, key, validation)
        .map_err(|error| {
            unauthorized(match error.kind() {
                ErrorKind::ExpiredSignature => "the token has expired",
                ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
                ErrorKind::InvalidSignature => "the token's signature does not match",
                ErrorKind::InvalidAlgorithm => "the token is not signed with HS256",
                ErrorKind::MissingRequiredClaim(_) => "the token has no exp",
                _ => "the token is not a valid JWT",
            })
        })?
        .claims;
    subject_user(&claims.sub).ok_or_else(|| {
        unauthorized("the token's sub must be a user id from 1 to 9223372036854775807")
    })
}

/// `sub` as a user id: a decimal string or a JSON integer, 1 to 2^63 - 1.
/// The string must be the id's one spelling (no leading zeros): "007" and
/// "7" would otherwise be two subjects of the issuer and one user here.
fn subject_user(sub: &Value) -> Option<i64> {
    let id = match sub {
        Value::String(text)
            if !text.starts_with('0')
                && !text.is_empty()
                && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            text.parse::<i64>().ok()?
        }
        Value::Number(number) => number.as_i64()?,
        _ => return None,
    };
    (id >= 1).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const SECRET: &str = "test secret of 32 bytes or more..";

    fn jwt() -> Auth {
        let config = AuthConfig::Jwt {
            secret: SECRET.to_owned(),
        };
        Auth::new(&config, "127.0.0.1:0".parse().unwrap()).unwrap()
    }

    fn token(alg: Algorithm, secret: &str, claims: Value) -> String {
        jsonwebtoken::encode(
            &Header::new(alg),
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    fn in_an_hour() -> i64 {
        chrono::Utc::now().timestamp() + 3600
    }

    #[test]
    fn sub_is_a_positive_i64_as_text_or_number() {
        assert_eq!(subject_user(&json!("42")), Some(42));
        assert_eq!(subject_user(&json!(42)), Some(42));
        assert_eq!(subject_user(&json!(i64::MAX)), Some(i64::MAX));
        for bad in [
            json!("0"),
            json!("007"),
            json!("07"),
            json!(0),
            json!(-1),
            json!("-1"),
            json!("+1"),
            json!(" 1"),
            json!(""),
            json!("9223372036854775808"),
            json!(9_223_372_036_854_775_808_u64),
            json!(1.5),
            json!(null),
            json!(["1"]),
        ] {
            assert_eq!(subject_user(&bad), None, "{bad}");
        }
    }

    #[test]
    fn jwt_mode_accepts_good_tokens_only() {
        let auth = jwt();
        let good = token(
            Algorithm::HS256,
            SECRET,
            json!({"sub": "7", "exp": in_an_hour()}),
        );
        assert_eq!(auth.user(&bearer(&good)).unwrap(), 7);
        let lower = {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&format!("bearer {good}")).unwrap(),
            );
            headers
        };
        assert_eq!(auth.user(&lower).unwrap(), 7);

        let refused = |headers: HeaderMap, why: &str| {
            let error = auth.user(&headers).unwrap_err();
            assert_eq!(error.status().as_u16(), 401, "{why}");
            assert_eq!(error.code.as_str(), "unauthorized", "{why}");
            assert!(
                error.message.as_deref().unwrap().contains(why),
                "{why}: {error:?}"
            );
        };
        refused(HeaderMap::new(), "missing");
        let past = chrono::Utc::now().timestamp() - 3600;
        refused(
            bearer(&token(
                Algorithm::HS256,
                SECRET,
                json!({"sub": "7", "exp": past}),
            )),
            "expired",
        );
        refused(
            bearer(&token(
                Algorithm::HS256,
                "other",
                json!({"sub": "7", "exp": in_an_hour()}),
            )),
            "signature",
        );
        refused(
            bearer(&token(
                Algorithm::HS384,
                SECRET,
                json!({"sub": "7", "exp": in_an_hour()}),
            )),
            "HS256",
        );
        refused(
            bearer(&token(Algorithm::HS256, SECRET, json!({"sub": "7"}))),
            "exp",
        );
        refused(
            bearer(&token(
                Algorithm::HS256,
                SECRET,
                json!({"sub": "0", "exp": in_an_hour()}),
            )),
            "sub",
        );
        refused(
            bearer(&token(
                Algorithm::HS256,
                SECRET,
                json!({"exp": in_an_hour()}),
            )),
            "sub",
        );
        refused(bearer("not.a.jwt"), "not a valid JWT");
        let mut basic = HeaderMap::new();
        basic.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic dTpw"),
        );
        refused(basic, "Bearer");
    }

    #[test]
    fn header_mode_needs_loopback_and_jwt_a_secret() {
        let header = AuthConfig::Header;
        assert!(Auth::new(&header, "127.0.0.1:8080".parse().unwrap()).is_ok());
        assert!(Auth::new(&header, "[::1]:8080".parse().unwrap()).is_ok());
        let refusal = Auth::new(&header, "0.0.0.0:8080".parse().unwrap())
            .err()
            .unwrap();
        assert!(refusal.contains("loopback"), "{refusal}");
        assert!(Auth::new(&header, "10.1.2.3:8080".parse().unwrap()).is_err());
        let empty = AuthConfig::Jwt {
            secret: String::new(),
        };
        assert!(Auth::new(&empty, "0.0.0.0:8080".parse().unwrap()).is_err());
        let short = AuthConfig::Jwt {
            secret: "s".repeat(MIN_SECRET_BYTES - 1),
        };
        let refusal = Auth::new(&short, "0.0.0.0:8080".parse().unwrap())
            .err()
            .unwrap();
        assert!(refusal.contains("at least 32"), "{refusal}");
        let secret = format!("hunter2{}", "2".repeat(MIN_SECRET_BYTES));
        let jwt = AuthConfig::Jwt {
            secret: secret.clone(),
        };
        assert!(Auth::new(&jwt, "0.0.0.0:8080".parse().unwrap()).is_ok());
        assert!(!format!("{jwt:?}").contains("hunter2"));
    }
}

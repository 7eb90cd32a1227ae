//! Who the load's users say they are: the `X-User-Id` header (services
//! started with `--auth header`), or a JWT per user signed with the
//! service's `--jwt-secret` (services started with `--auth jwt`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{EncodingKey, Header};

/// How long the load's tokens are valid: longer than any run.
const TOKEN_LIFETIME_SECONDS: u64 = 6 * 60 * 60;

/// How a request names its user.
#[derive(Clone, Default)]
pub enum Identity {
    /// `X-User-Id: N`.
    #[default]
    Header,
    /// `Authorization: Bearer <JWT>`, HS256 with this secret, `sub` = N.
    Jwt(Arc<EncodingKey>),
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.write_str(match self {
            Identity::Header => "Identity::Header",
            Identity::Jwt(_) => "Identity::Jwt(..)",
        })
    }
}

#[derive(serde::Serialize)]
struct Claims {
    sub: String,
    exp: u64,
}

impl Identity {
    /// Tokens signed with `secret` (the service's `--jwt-secret`).
    pub fn jwt(secret: &str) -> Identity {
        Identity::Jwt(Arc::new(EncodingKey::from_secret(secret.as_bytes())))
    }

    /// `request`, as `user`.
    pub(crate) fn sign(
        &self,
        request: reqwest::RequestBuilder,
        user: u64,
    ) -> reqwest::RequestBuilder {
        match self {
            Identity::Header => request.header("X-User-Id", user.to_string()),
            Identity::Jwt(key) => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs());
                let claims = Claims {
                    sub: user.to_string(),
                    exp: now + TOKEN_LIFETIME_SECONDS,
                };
                match jsonwebtoken::encode(&Header::default(), &claims, key) {
                    Ok(token) => request.bearer_auth(token),
                    // HS256 over a small JSON document does not fail; if it
                    // did, the service answers 401 and the report shows it.
                    Err(_) => request,
                }
            }
        }
    }
}

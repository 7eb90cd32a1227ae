//! The numeric id in a path (`/vouchers/{id}`, `/orders/{id}`). Anything but
//! a decimal number names nothing (404 `not_found`), including a segment that does not decode
//! (bad percent-encoding, not UTF-8), which axum's own `Path` would answer
//! with a plain-text 400.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::error::ApiError;

/// The `{id}` of `/vouchers/{id}`, `/vouchers/{id}/orders`, `/orders/{id}`...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<PathId, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found())?;
        raw.parse().map(PathId).map_err(|_| ApiError::not_found())
    }
}

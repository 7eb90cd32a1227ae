//! The voucher id in a path. Anything but a decimal number names no
//! voucher (404 `not_found`), including a segment that does not decode
//! (bad percent-encoding, not UTF-8), which axum's own `Path` would answer
//! with a plain-text 400.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::error::ApiError;

/// The `{id}` of `/vouchers/{id}` and `/vouchers/{id}/orders`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VoucherId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for VoucherId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<VoucherId, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found())?;
        raw.parse()
            .map(VoucherId)
            .map_err(|_| ApiError::not_found())
    }
}

//! The buyer's identity: the `X-User-Id` header (a stand-in for the seed's
//! logged-in user, `UserHolder.getUser()`).

use axum::http::HeaderMap;

use super::error::ApiError;

/// The header carrying the user id.
pub const USER_ID_HEADER: &str = "x-user-id";

/// The user id of a request: a decimal integer from 1 to 2^63 - 1 (it is
/// stored in a BIGINT column).
pub fn user_id(headers: &HeaderMap) -> Result<i64, ApiError> {
    let raw = headers
        .get(USER_ID_HEADER)
        .ok_or_else(|| ApiError::bad_user_id("the X-User-Id header is missing"))?;
    let text = raw
        .to_str()
        .map_err(|_| ApiError::bad_user_id("X-User-Id is not text"))?
        .trim();
    match text.parse::<u64>() {
        Ok(id) if id >= 1 && id <= i64::MAX as u64 => Ok(id as i64),
        _ => Err(ApiError::bad_user_id(
            "X-User-Id must be an integer from 1 to 9223372036854775807",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(USER_ID_HEADER, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn accepts_positive_integers_only() {
        assert_eq!(user_id(&headers("42")).unwrap(), 42);
        assert_eq!(user_id(&headers(" 7 ")).unwrap(), 7);
        assert_eq!(user_id(&headers("9223372036854775807")).unwrap(), i64::MAX);
        for bad in [
            "",
            "0",
            "-1",
            "abc",
            "1.5",
            "9223372036854775808",
            "18446744073709551616",
        ] {
            let error = user_id(&headers(bad)).unwrap_err();
            assert_eq!(error.code.as_str(), "bad_user_id", "{bad:?}");
        }
        assert_eq!(
            user_id(&HeaderMap::new()).unwrap_err().code.as_str(),
            "bad_user_id"
        );
    }
}

//! Browsers on other sites may not change anything: a POST that a browser
//! marks as coming from another origin (`Origin` not this host, or
//! `Sec-Fetch-Site` other than `same-origin` / `none`) is refused with 403
//! `forbidden` before any handler runs. Without either header (curl, the
//! load generator, other services) it passes: only browsers send them, and
//! only browsers carry a victim's ambient credentials (a loopback address,
//! cookies) to a site that did not ask for them.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::error_code::ErrorCode;

/// The middleware (`axum::middleware::from_fn`), around every route.
pub async fn guard(request: Request, next: Next) -> Response {
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if safe || !from_another_origin(request.headers()) {
        return next.run(request).await;
    }
    ApiError::with_message(
        ErrorCode::Forbidden,
        "a request from another site's page is refused",
    )
    .into_response()
}

/// Whether a browser says the request comes from a page of another origin.
fn from_another_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.split_once("://"))
        .map(|(_, host)| host);
    // "null" (a sandboxed page, a file) and unreadable values are foreign too.
    !matches!((origin_host, host), (Some(from), Some(host)) if from.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().expect("header value"));
        }
        headers
    }

    #[test]
    fn only_browsers_saying_another_origin_are_refused() {
        let host = ("host", "127.0.0.1:8080");
        assert!(!from_another_origin(&headers(&[host])));
        assert!(!from_another_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(!from_another_origin(&headers(&[
            host,
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(from_another_origin(&headers(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(from_another_origin(&headers(&[host, ("origin", "null")])));
        assert!(from_another_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:9000")
        ])));
        assert!(from_another_origin(&headers(&[
            host,
            ("sec-fetch-site", "cross-site")
        ])));
    }
}

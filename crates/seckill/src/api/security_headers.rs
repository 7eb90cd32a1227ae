//! Headers on every answer that tell browsers what the shop's pages may do:
//! not be framed by another site (clickjacking the grab button), not have
//! their type guessed, and, for the page itself, run only its own script
//! and style and talk only to the shop (`Content-Security-Policy`, with the
//! hashes of the page's inline script and style).

use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

/// The policy of `GET /`: nothing but its own inline script and style
/// (by hash) and requests to the shop.
pub static PAGE_POLICY: LazyLock<String> = LazyLock::new(|| {
    let page = super::ops::PAGE;
    format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; \
         img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash_of(between(page, "<script>", "</script>")),
        hash_of(between(page, "<style>", "</style>")),
    )
});

/// The middleware (`axum::middleware::from_fn`), around every route.
pub async fn add(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    let is_html = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/html"));
    if is_html && let Ok(policy) = HeaderValue::from_str(&PAGE_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// The text between the first `open` and the `close` after it ("" if none).
fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    text.split_once(open)
        .and_then(|(_, rest)| rest.split_once(close))
        .map_or("", |(inside, _)| inside)
}

/// `sha256-BASE64`, a CSP source for an inline element with this text.
fn hash_of(text: &str) -> String {
    format!("sha256-{}", base64(&Sha256::digest(text.as_bytes())))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0u32, |word, (at, byte)| {
            word | u32::from(*byte) << (16 - 8 * at)
        });
        for at in 0..4 {
            if at <= chunk.len() {
                out.push(char::from(ALPHABET[(word >> (18 - 6 * at)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_page_policy_names_its_script_and_style() {
        assert!(
            PAGE_POLICY.contains("script-src 'sha256-"),
            "{}",
            *PAGE_POLICY
        );
        assert!(
            PAGE_POLICY.contains("style-src 'sha256-"),
            "{}",
            *PAGE_POLICY
        );
        assert!(!between(super::super::ops::PAGE, "<script>", "</script>").is_empty());
    }
}

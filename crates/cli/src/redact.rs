//! Keeping passwords out of everything redlatch prints: every line it
//! writes to stderr (failures, the lost-lock line, log events) goes through
//! [`redact`], which masks the password of any URL in it, parsable or not,
//! and every password redlatch has seen. Below `exit` and `secrets`, which
//! both use it, so neither needs the other for this.

use std::io::{self, Write};
use std::sync::Mutex;

/// The mask that replaces a password.
const MASK: &str = "***";

/// Every password seen (as written, percent-decoded, escaped as `{:?}`
/// escapes it): masked wherever it appears, for messages that quote a URL
/// too broken to find its password in.
static KNOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remembers the passwords of URLs as given (flags, `REDIS_URL`), before
/// the library reads them: its refusal of a URL may quote it.
pub fn remember_urls<'a>(urls: impl IntoIterator<Item = &'a str>) {
    for url in urls {
        if let Some(own) = url_password(url) {
            remember(own);
        }
    }
}

/// The password written in a whole URL string, even one that does not
/// parse (`redis//u:pw@h` too): after the user's `:`, up to the last `@`.
pub fn url_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let userinfo = &rest[..rest.rfind('@')?];
    let password = userinfo.split_once(':').map_or(userinfo, |(_, pw)| pw);
    (!password.is_empty()).then_some(password)
}

/// Remembers a password in every form a message may show it in.
pub fn remember(password: &str) {
    let mut forms = vec![password.to_owned(), percent_encode(password)];
    if let Some(decoded) = percent_decode(password) {
        forms.push(decoded);
    }
    let debug = format!("{password:?}");
    forms.push(debug[1..debug.len() - 1].to_owned());
    let mut known = KNOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for form in forms {
        if !form.is_empty() && !known.contains(&form) {
            known.push(form);
        }
    }
    // Longest first, so that no shorter form leaves part of a longer one.
    known.sort_by_key(|form| std::cmp::Reverse(form.len()));
}

/// `text` with the password of every `scheme://user:password@` in it
/// masked, whether the URL parses or not (the userinfo runs to the last `@`
/// before a space or quote, so a password holding `/` or `@` is masked
/// whole), and every password redlatch knows masked wherever it appears.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // "//", not "://": a URL missing its colon (`redis//u:pw@h`) is refused
    // with a message that quotes it.
    while let Some(start) = rest.find("//") {
        out.push_str(&rest[..start + 2]);
        let after = &rest[start + 2..];
        let span_end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .unwrap_or(after.len());
        match after[..span_end].rfind('@') {
            Some(at) => {
                match after[..at].split_once(':') {
                    Some((user, _)) => out.push_str(&format!("{user}:{MASK}@")),
                    None if at == 0 => out.push('@'),
                    // `redis://password@host`: mask it, whatever it is.
                    None => out.push_str(&format!("{MASK}@")),
                }
                rest = &after[at + 1..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    let known = KNOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for password in known.iter() {
        if out.contains(password.as_str()) {
            out = out.replace(password.as_str(), MASK);
        }
    }
    out
}

/// Percent-encodes all but RFC 3986's unreserved characters.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes; `None` when there are none or they do not decode.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The log writer: each event, once formatted, is redacted and written to
/// stderr in one piece.
pub struct RedactedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactedStderr {
    type Writer = EventBuffer;

    fn make_writer(&'a self) -> EventBuffer {
        EventBuffer(Vec::new())
    }
}

/// One log event being written; flushed to stderr, redacted, when dropped.
pub struct EventBuffer(Vec<u8>);

impl Write for EventBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for EventBuffer {
    fn drop(&mut self) {
        let text = redact(&String::from_utf8_lossy(&self.0));
        let _ = io::stderr().lock().write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_even_when_they_do_not_parse() {
        assert_eq!(
            redact(r#"redis URL "redis://user:zq9/x@y@host:abc": did not parse"#),
            r#"redis URL "redis://user:***@host:abc": did not parse"#
        );
        assert_eq!(
            redact("at redis://h:1 and rediss://:k3y@[::1 and redis://k3y2@h"),
            "at redis://h:1 and rediss://:***@[::1 and redis://***@h"
        );
        assert_eq!(
            redact(r#"urls: "redis//u:zq9@h" is not a redis:// URL"#),
            r#"urls: "redis//u:***@h" is not a redis:// URL"#
        );
        assert_eq!(redact("no url here"), "no url here");
    }

    #[test]
    fn known_passwords_are_masked_in_any_form() {
        remember("kn0wn pa\"ss");
        assert_eq!(redact("a kn0wn pa\"ss b"), "a *** b");
        assert_eq!(redact(r#"quoted "kn0wn pa\"ss""#), r#"quoted "***""#);
        assert_eq!(redact("encoded kn0wn%20pa%22ss"), "encoded ***");
    }
}

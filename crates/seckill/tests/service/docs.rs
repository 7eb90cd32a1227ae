//! The docs say what the code answers: the README's HTTP section names each
//! error code with the status it is answered with, and every code the API
//! can answer is there; the reasons listed for
//! `seckill_order_rejections_total` (docs/METRICS.md and the metrics module's
//! table) are exactly the codes an order can be refused with.

use std::collections::{BTreeMap, BTreeSet};

use seckill::api::error_code::ErrorCode;

fn read(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// The text of the README section that starts with `heading`, up to the
/// next heading of the same level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    let level = heading.split(' ').next().unwrap_or("###");
    let rest = &text[start + heading.len() + 2..];
    let end = rest.find(&format!("\n{level} ")).unwrap_or(rest.len());
    &rest[..end]
}

/// The backquoted words of `text` that look like codes (`[a-z_]+`).
fn codes_in(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

/// Each `NNN `code`` of `text`, with `NNN `a` / `b`` giving both codes the
/// status: code → the statuses it is documented with.
fn documented_statuses(text: &str) -> BTreeMap<String, BTreeSet<u16>> {
    let mut found: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while at + 5 <= bytes.len() {
        let window = &text[at..];
        let status = window
            .get(..3)
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .filter(|_| at == 0 || !bytes[at - 1].is_ascii_alphanumeric())
            .and_then(|digits| digits.parse::<u16>().ok());
        let Some(status) = status.filter(|_| window[3..].starts_with(" `")) else {
            at += window.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // The code, then any " / `more`" that share the status.
        let mut rest = &window[4..];
        while let Some(body) = rest.strip_prefix('`') {
            let Some(end) = body.find('`') else { break };
            let code = &body[..end];
            if code.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !code.is_empty() {
                found.entry(code.to_owned()).or_default().insert(status);
            }
            rest = match body[end + 1..].strip_prefix(" / ") {
                Some(next) if next.starts_with('`') => next,
                _ => break,
            };
        }
        at += 4;
    }
    found
}

#[test]
fn the_readme_names_every_error_code_with_its_status() {
    let readme = read("README.md");
    let documented = documented_statuses(section(&readme, "### HTTP API"));
    for (code, statuses) in &documented {
        let known = ErrorCode::ALL
            .into_iter()
            .find(|known| known.as_str() == code)
            .unwrap_or_else(|| panic!("README documents `{code}`, which the API never answers"));
        let status = known.status().as_u16();
        assert_eq!(
            statuses,
            &BTreeSet::from([status]),
            "README gives `{code}` the status(es) {statuses:?}; the API answers {status}"
        );
    }
    let missing: Vec<&str> = ErrorCode::ALL
        .into_iter()
        .map(ErrorCode::as_str)
        .filter(|code| !documented.contains_key(*code))
        .collect();
    assert!(
        missing.is_empty(),
        "README's HTTP API section lacks {missing:?}"
    );
}

/// The reasons in the table row of `seckill_order_rejections_total` in `text`.
fn rejection_reasons(text: &str, file: &str) -> BTreeSet<String> {
    let row = text
        .lines()
        .find(|line| line.contains("| `seckill_order_rejections_total`"))
        .unwrap_or_else(|| panic!("{file}: no row for seckill_order_rejections_total"));
    codes_in(row)
        .into_iter()
        .filter(|word| !["instance", "strategy", "reason"].contains(word))
        .filter(|word| !word.starts_with("seckill_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_rejection_reasons_listed_are_those_an_order_can_get() {
    let expected: BTreeSet<String> = ErrorCode::ALL
        .into_iter()
        .filter(|code| code.refuses_orders())
        .map(|code| code.as_str().to_owned())
        .collect();
    for file in ["../../docs/METRICS.md", "src/metrics.rs"] {
        let listed = rejection_reasons(&read(file), file);
        assert_eq!(
            listed, expected,
            "{file}: the reasons of seckill_order_rejections_total"
        );
    }
}

#[test]
fn the_parser_reads_shared_statuses_and_skips_bodies() {
    let found = documented_statuses(
        "403 `not_started` / `ended`; 503 `{\"status\"}`; 404 `not_found` / 405 `method_not_allowed`; x1409 `no`",
    );
    let expected: BTreeMap<String, BTreeSet<u16>> = [
        ("not_started", 403),
        ("ended", 403),
        ("not_found", 404),
        ("method_not_allowed", 405),
    ]
    .into_iter()
    .map(|(code, status)| (code.to_owned(), BTreeSet::from([status])))
    .collect();
    assert_eq!(found, expected);
}

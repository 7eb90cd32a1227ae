//! `top`'s plain-text form, for a pipe or a log: one table per refresh.

use std::fmt::Write as _;

use super::sample::{Row, Snapshot};

/// The refresh as a table, most contended lock first.
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = format!(
        "{:<32} {:<10} {:>7} {:>9} {:>8} {:>7} {:>9}  holders",
        "name", "kind", "waiters", "ttl", "token", "acq/s", "wait"
    );
    if snapshot.locks.is_empty() {
        out.push_str("\n(no lock held)");
    }
    for row in &snapshot.locks {
        let _ = write!(
            out,
            "\n{:<32} {:<10} {:>7} {:>9} {:>8} {:>7} {:>9}  {}",
            row.name,
            row.kind,
            row.waiters,
            millis(row.ttl_ms),
            row.token
                .map_or_else(|| "-".to_owned(), |token| token.to_string()),
            rate(row),
            millis(Some(row.longest_wait_ms).filter(|&ms| ms > 0)),
            row.holders.join(", ")
        );
    }
    out
}

/// `1234ms` or `-`.
pub fn millis(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms"))
}

/// Acquisitions per second with one decimal, `-` before a rate is known.
pub fn rate(row: &Row) -> String {
    row.acquisitions_per_s
        .map_or_else(|| "-".to_owned(), |rate| format!("{rate:.1}"))
}

//! The demo's table: one row per strategy, what each row shows, and whether
//! the table tells the lesson it should.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::load::LoadReport;
use crate::strategy::StrategyKind;

/// One strategy's outcome; the demo's `--json` prints an array of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoRow {
    /// naive, optimistic, local-lock, redis-lock or reserve.
    pub strategy: String,
    /// Orders in the database after the run (it starts empty).
    pub orders: u64,
    /// Sold beyond the stock.
    pub oversold: u64,
    /// Users holding more than one order.
    pub duplicate_users: u64,
    /// Orders answered `201` that never reached the database.
    pub lost: u64,
    pub requests_per_sec: f64,
    /// 99th percentile latency of the order requests, in milliseconds.
    pub p99_ms: f64,
    /// `201` answers.
    pub accepted: u64,
    pub remaining_stock: i64,
    /// Answers per HTTP status code ("error": transport failures).
    pub statuses: BTreeMap<String, u64>,
    /// What the strategy does, and so what its row shows.
    pub shows: String,
}

impl DemoRow {
    /// The row of `strategy` from its load report.
    pub fn new(strategy: StrategyKind, report: &LoadReport) -> Self {
        Self {
            strategy: strategy.to_string(),
            orders: report.new_orders,
            oversold: report.oversold,
            duplicate_users: report.duplicate_users,
            lost: report.missing,
            requests_per_sec: report.requests_per_sec.round(),
            p99_ms: (report.latency_us.p99 as f64 / 100.0).round() / 10.0,
            accepted: report.accepted,
            remaining_stock: report.remaining_stock,
            statuses: report.statuses.clone(),
            shows: shows(strategy).to_owned(),
        }
    }
}

/// What each strategy demonstrates (seed 004's steps, in order).
pub fn shows(strategy: StrategyKind) -> &'static str {
    match strategy {
        StrategyKind::Naive => {
            "checks the stock, then decrements it: simultaneous buyers all see stock left, so it oversells"
        }
        StrategyKind::Optimistic => {
            "decrements only WHERE stock > 0, so it never oversells, but its one-order-per-user check is still check-then-act: duplicates get through"
        }
        StrategyKind::LocalLock => {
            "a per-user lock inside each process: it holds on one instance, but two instances have two locks, so a user's clicks on both get through"
        }
        StrategyKind::RedisLock => {
            "a per-user redlatch lock that both instances share: never oversold, one order per user, nothing lost"
        }
        StrategyKind::Reserve => {
            "an atomic Lua reservation in Redis (stock and buyers at once), orders written by a stream consumer: 0/0/0 without a lock"
        }
    }
}

/// The table as printed: a header, one line per row, then what each shows.
pub fn render(rows: &[DemoRow]) -> String {
    let width = rows
        .iter()
        .map(|row| row.strategy.len())
        .max()
        .unwrap_or(0)
        .max("strategy".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>8}  {:>15}  {:>4}  {:>6}  {:>7}",
        "strategy", "orders", "oversold", "duplicate users", "lost", "req/s", "p99 ms"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>8}  {:>15}  {:>4}  {:>6.0}  {:>7.1}",
            row.strategy,
            row.orders,
            row.oversold,
            row.duplicate_users,
            row.lost,
            row.requests_per_sec,
            row.p99_ms
        );
    }
    out.push('\n');
    for row in rows {
        let _ = writeln!(out, "{:<width$}  {}", row.strategy, row.shows);
    }
    out
}

/// The verdict on the table: `failures` break the lesson (exit 1), `notes`
/// say that a teaching strategy did not show its flaw this time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lesson {
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

/// Checks the rows against the lesson: `redis-lock` and `reserve` sell
/// exactly min(stock, users) with nothing oversold, duplicated or lost, and
/// `optimistic` never oversells. A `naive` that did not oversell or a
/// `local-lock` without duplicates is only noted: those are races (or the
/// sale was too small for them: no more clicks than stock, one click each).
pub fn lesson(rows: &[DemoRow], stock: u64, users: u64, clicks: u32) -> Lesson {
    let mut lesson = Lesson::default();
    let expected_orders = stock.min(users);
    let clicks_total = users.saturating_mul(u64::from(clicks));
    for row in rows {
        let name = row.strategy.as_str();
        let is = |kind: StrategyKind| name == kind.to_string();
        if is(StrategyKind::RedisLock) || is(StrategyKind::Reserve) {
            let clean = (row.orders, row.oversold, row.duplicate_users, row.lost)
                == (expected_orders, 0, 0, 0);
            if !clean {
                lesson.failures.push(format!(
                    "{name} should sell exactly {expected_orders} with 0 oversold, 0 duplicate users and 0 lost, \
                     but sold {} with {} oversold, {} duplicate users and {} lost",
                    row.orders, row.oversold, row.duplicate_users, row.lost
                ));
            }
        } else if is(StrategyKind::Optimistic) && row.oversold != 0 {
            lesson.failures.push(format!(
                "optimistic should never oversell, but oversold {}",
                row.oversold
            ));
        } else if is(StrategyKind::Naive) && row.oversold == 0 {
            lesson.notes.push(if clicks_total <= stock {
                format!("naive could not oversell: {clicks_total} clicks for a stock of {stock}")
            } else {
                "naive did not oversell this time (a race: run it again)".to_owned()
            });
        } else if is(StrategyKind::LocalLock) && row.duplicate_users == 0 {
            lesson.notes.push(if clicks < 2 {
                "local-lock cannot show duplicates with one click per user".to_owned()
            } else {
                "local-lock let no duplicate through this time (a race: run it again)".to_owned()
            });
        }
    }
    lesson
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        strategy: StrategyKind,
        orders: u64,
        oversold: u64,
        duplicates: u64,
        lost: u64,
    ) -> DemoRow {
        DemoRow {
            strategy: strategy.to_string(),
            orders,
            oversold,
            duplicate_users: duplicates,
            lost,
            requests_per_sec: 1000.0,
            p99_ms: 12.5,
            accepted: orders,
            remaining_stock: 0,
            statuses: BTreeMap::new(),
            shows: shows(strategy).to_owned(),
        }
    }

    fn expected_table() -> Vec<DemoRow> {
        vec![
            row(StrategyKind::Naive, 140, 40, 20, 0),
            row(StrategyKind::Optimistic, 100, 0, 15, 0),
            row(StrategyKind::LocalLock, 100, 0, 9, 0),
            row(StrategyKind::RedisLock, 100, 0, 0, 0),
            row(StrategyKind::Reserve, 100, 0, 0, 0),
        ]
    }

    #[test]
    fn the_expected_table_passes() {
        assert_eq!(lesson(&expected_table(), 100, 500, 3), Lesson::default());
    }

    #[test]
    fn a_safe_strategy_with_a_duplicate_fails() {
        let mut rows = expected_table();
        rows[3].duplicate_users = 1;
        let verdict = lesson(&rows, 100, 500, 3);
        assert_eq!(verdict.failures.len(), 1);
        assert!(
            verdict.failures[0].starts_with("redis-lock"),
            "{:?}",
            verdict.failures
        );
    }

    #[test]
    fn a_safe_strategy_selling_short_fails() {
        let mut rows = expected_table();
        rows[4].orders = 99;
        assert_eq!(lesson(&rows, 100, 500, 3).failures.len(), 1);
    }

    #[test]
    fn fewer_users_than_stock_sell_one_each() {
        let rows = vec![row(StrategyKind::RedisLock, 50, 0, 0, 0)];
        assert!(lesson(&rows, 100, 50, 3).failures.is_empty());
    }

    #[test]
    fn a_teaching_strategy_that_held_is_only_noted() {
        let mut rows = expected_table();
        rows[0].oversold = 0;
        rows[2].duplicate_users = 0;
        let verdict = lesson(&rows, 100, 500, 3);
        assert!(verdict.failures.is_empty());
        assert_eq!(verdict.notes.len(), 2);
        assert!(
            verdict
                .notes
                .iter()
                .all(|note| note.contains("run it again")),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_sale_too_small_for_the_races_says_so() {
        let mut rows = expected_table();
        rows[0].oversold = 0;
        rows[2].duplicate_users = 0;
        let verdict = lesson(&rows, 100, 10, 1);
        assert_eq!(
            verdict.notes,
            [
                "naive could not oversell: 10 clicks for a stock of 100",
                "local-lock cannot show duplicates with one click per user"
            ]
        );
    }

    #[test]
    fn the_table_lines_up() {
        let text = render(&expected_table());
        let lines: Vec<&str> = text.lines().take(6).collect();
        assert!(lines[0].starts_with("strategy"));
        assert!(
            lines.iter().all(|line| line.len() == lines[0].len()),
            "{text}"
        );
    }
}

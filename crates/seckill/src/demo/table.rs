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
    /// The strategy's command-line name ([`StrategyKind::name`]).
    pub strategy: String,
    /// Orders in the database after the run (it starts empty).
    pub orders: u64,
    /// The voucher's stock before the sale.
    pub stock: i64,
    /// Order requests sent (users × clicks).
    pub requests: u64,
    /// `409 conflict` answers: buyers an optimistic lock refused while
    /// stock was left.
    pub conflicts: u64,
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
            orders: report.verdict.new_orders,
            stock: report.verdict.initial_stock,
            requests: report.requests,
            conflicts: report.errors.get("conflict").copied().unwrap_or(0),
            oversold: report.verdict.oversold,
            duplicate_users: report.verdict.duplicate_users,
            lost: report.verdict.missing,
            requests_per_sec: report.requests_per_sec.round(),
            p99_ms: (report.latency_us.p99 as f64 / 100.0).round() / 10.0,
            accepted: report.accepted,
            remaining_stock: report.verdict.remaining_stock,
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
        StrategyKind::OptimisticVersion => {
            "decrements only WHERE version = the version read: never oversold, but a buyer whose read another sale overtook is refused (409 conflict) with stock left: most attempts fail"
        }
        StrategyKind::OptimisticCompare => {
            "decrements only WHERE stock = the stock read: never oversold, but buyers who read the same stock race, one wins, the rest get 409 conflict with stock left"
        }
        StrategyKind::Optimistic => {
            "decrements only WHERE stock > 0, so it never oversells, but its one-order-per-user check is still check-then-act: duplicates get through"
        }
        StrategyKind::LocalLock => {
            "a per-user lock inside each process: it holds on one instance, but two instances have two locks, so a user's clicks on both get through"
        }
        StrategyKind::EarlyRelease => {
            "the shared redlatch lock, but released before the transaction commits: a user's next click takes it, finds no committed order, and buys again"
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
///
/// `sold` is orders over the stock on sale, `unsold` the stock left at the
/// end (0 when oversold), `conflicts` the `409 conflict` answers, `success`
/// the share of the sales a strategy tried that went through
/// ([`DemoRow::success_percent`]).
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
        "{:<width$}  {:>9}  {:>6}  {:>9}  {:>8}  {:>15}  {:>4}  {:>7}  {:>6}  {:>7}",
        "strategy",
        "sold",
        "unsold",
        "conflicts",
        "oversold",
        "duplicate users",
        "lost",
        "success",
        "req/s",
        "p99 ms"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>9}  {:>6}  {:>9}  {:>8}  {:>15}  {:>4}  {:>6.1}%  {:>6.0}  {:>7.1}",
            row.strategy,
            format!("{}/{}", row.orders, row.stock),
            row.unsold(),
            row.conflicts,
            row.oversold,
            row.duplicate_users,
            row.lost,
            row.success_percent(),
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

impl DemoRow {
    /// Stock left at the end (0 when it went below zero: see `oversold`).
    pub fn unsold(&self) -> u64 {
        u64::try_from(self.remaining_stock).unwrap_or(0)
    }

    /// Of the sales the strategy tried, the share that went through: `201`
    /// answers over `201` plus `409 conflict`, in percent. 100 for every
    /// strategy without an optimistic write (and when nothing was tried);
    /// refusals for a reason (sold out, already ordered) do not count.
    pub fn success_percent(&self) -> f64 {
        let tried = self.accepted + self.conflicts;
        if tried == 0 {
            100.0
        } else {
            self.accepted as f64 * 100.0 / tried as f64
        }
    }
}

/// The verdict on the table: `failures` break the lesson (exit 1), `notes`
/// say that a teaching strategy did not show its flaw this time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lesson {
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

/// Checks the rows against the lesson: `redis-lock` and `reserve` sell
/// exactly min(stock, users) with nothing oversold, duplicated or lost;
/// `optimistic` and `early-release` never oversell; the two optimistic
/// locks (`optimistic-version`, `optimistic-compare`) neither oversell nor
/// duplicate. A teaching strategy that did not show its flaw is only noted:
/// a `naive` that did not oversell, a `local-lock` or `early-release`
/// without duplicates, an optimistic lock that sold everything. Those are
/// races (or the sale was too small for them).
pub fn lesson(rows: &[DemoRow], stock: u64, users: u64, clicks: u32) -> Lesson {
    let mut lesson = Lesson::default();
    let expected_orders = stock.min(users);
    let clicks_total = users.saturating_mul(u64::from(clicks));
    for row in rows {
        let name = row.strategy.as_str();
        let Some(kind) = StrategyKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
        else {
            lesson
                .failures
                .push(format!("{name} is not a strategy of this build"));
            continue;
        };
        match kind {
            StrategyKind::RedisLock | StrategyKind::Reserve => {
                let clean = (row.orders, row.oversold, row.duplicate_users, row.lost)
                    == (expected_orders, 0, 0, 0);
                if !clean {
                    lesson.failures.push(format!(
                        "{name} should sell exactly {expected_orders} with 0 oversold, 0 duplicate users and 0 lost, \
                         but sold {} with {} oversold, {} duplicate users and {} lost",
                        row.orders, row.oversold, row.duplicate_users, row.lost
                    ));
                }
            }
            StrategyKind::Optimistic | StrategyKind::EarlyRelease if row.oversold != 0 => {
                lesson.failures.push(format!(
                    "{name} should never oversell, but oversold {}",
                    row.oversold
                ));
            }
            StrategyKind::OptimisticVersion | StrategyKind::OptimisticCompare => {
                if (row.oversold, row.duplicate_users) != (0, 0) {
                    lesson.failures.push(format!(
                        "{name} should neither oversell nor duplicate, but oversold {} with {} duplicate users",
                        row.oversold, row.duplicate_users
                    ));
                } else if row.conflicts == 0 {
                    lesson.notes.push(format!(
                        "{name} refused nobody this time: no two buyers read the same stock (a race: run it again)"
                    ));
                }
            }
            StrategyKind::Naive if row.oversold == 0 => {
                lesson.notes.push(if clicks_total <= stock {
                    format!(
                        "naive could not oversell: {clicks_total} clicks for a stock of {stock}"
                    )
                } else {
                    "naive did not oversell this time (a race: run it again)".to_owned()
                });
            }
            StrategyKind::LocalLock | StrategyKind::EarlyRelease if row.duplicate_users == 0 => {
                lesson.notes.push(if clicks < 2 {
                    format!("{name} cannot show duplicates with one click per user")
                } else {
                    format!("{name} let no duplicate through this time (a race: run it again)")
                });
            }
            _ => {}
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
            stock: 100,
            requests: 1500,
            conflicts: if matches!(
                strategy,
                StrategyKind::OptimisticVersion | StrategyKind::OptimisticCompare
            ) {
                4 * orders
            } else {
                0
            },
            oversold,
            duplicate_users: duplicates,
            lost,
            requests_per_sec: 1000.0,
            p99_ms: 12.5,
            accepted: orders,
            remaining_stock: 100 - orders as i64,
            statuses: BTreeMap::new(),
            shows: shows(strategy).to_owned(),
        }
    }

    fn expected_table() -> Vec<DemoRow> {
        vec![
            row(StrategyKind::Naive, 140, 40, 20, 0),
            row(StrategyKind::OptimisticVersion, 31, 0, 0, 0),
            row(StrategyKind::OptimisticCompare, 28, 0, 0, 0),
            row(StrategyKind::Optimistic, 100, 0, 15, 0),
            row(StrategyKind::LocalLock, 100, 0, 9, 0),
            row(StrategyKind::EarlyRelease, 100, 0, 12, 0),
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
        rows[6].duplicate_users = 1;
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
        rows[7].orders = 99;
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
        rows[1].conflicts = 0;
        rows[4].duplicate_users = 0;
        rows[5].duplicate_users = 0;
        let verdict = lesson(&rows, 100, 500, 3);
        assert!(verdict.failures.is_empty());
        assert_eq!(verdict.notes.len(), 4);
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
        rows[1].conflicts = 0;
        rows[2].conflicts = 0;
        rows[4].duplicate_users = 0;
        rows[5].duplicate_users = 0;
        let verdict = lesson(&rows, 100, 10, 1);
        assert_eq!(
            verdict.notes,
            [
                "naive could not oversell: 10 clicks for a stock of 100",
                "optimistic-version refused nobody this time: no two buyers read the same stock (a race: run it again)",
                "optimistic-compare refused nobody this time: no two buyers read the same stock (a race: run it again)",
                "local-lock cannot show duplicates with one click per user",
                "early-release cannot show duplicates with one click per user"
            ]
        );
    }

    #[test]
    fn optimistic_locks_and_early_release_must_not_oversell() {
        let mut rows = expected_table();
        rows[1].oversold = 1;
        rows[2].duplicate_users = 1;
        rows[5].oversold = 2;
        let verdict = lesson(&rows, 100, 500, 3);
        let names: Vec<&str> = verdict
            .failures
            .iter()
            .map(|failure| failure.split(' ').next().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            ["optimistic-version", "optimistic-compare", "early-release"],
            "{verdict:?}"
        );
    }

    #[test]
    fn sold_unsold_and_success_are_shown() {
        let text = render(&expected_table());
        let compare = text
            .lines()
            .find(|line| line.starts_with("optimistic-compare "))
            .expect("a row");
        let cells: Vec<&str> = compare.split_whitespace().collect();
        // strategy, sold, unsold, conflicts, oversold, duplicates, lost, success...
        assert_eq!(
            &cells[..8],
            [
                "optimistic-compare",
                "28/100",
                "72",
                "112",
                "0",
                "0",
                "0",
                "20.0%"
            ]
        );
        let redis_lock = text
            .lines()
            .find(|line| line.starts_with("redis-lock "))
            .expect("a row");
        assert!(redis_lock.contains("  100.0%  "), "{redis_lock}");
    }

    #[test]
    fn the_table_lines_up() {
        let text = render(&expected_table());
        let lines: Vec<&str> = text.lines().take(9).collect();
        assert!(lines[0].starts_with("strategy"));
        assert!(
            lines.iter().all(|line| line.len() == lines[0].len()),
            "{text}"
        );
    }
}

//! The load's report: what was sent, what came back, what the database
//! holds, as text for people and JSON for scripts.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::LoadConfig;
use super::fire::{Fired, Targets};
use super::source::Snapshot;
use super::verdict::Verdict;

/// Latency percentiles of the order requests, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl LatencySummary {
    fn of(histogram: &Histogram<u64>) -> Self {
        Self {
            p50: histogram.value_at_quantile(0.50),
            p99: histogram.value_at_quantile(0.99),
            max: histogram.max(),
        }
    }
}

/// Everything `seckill load` found; serialised as its `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The instances' base URLs.
    pub targets: Vec<String>,
    pub voucher: u64,
    pub users: u64,
    pub clicks: u32,
    /// "database" (read with `--database`) or "http" (the first target's API).
    pub verified_via: String,
    /// Requests sent (users × clicks).
    pub requests: u64,
    /// Time from the first click to the last answer, in milliseconds.
    pub elapsed_ms: u64,
    pub requests_per_sec: f64,
    pub latency_us: LatencySummary,
    /// Answers per HTTP status code, plus "error" for transport failures.
    pub statuses: BTreeMap<String, u64>,
    /// Refusals per `error` code of their JSON body (`sold_out`,
    /// `already_ordered`, `conflict`...); bodies without one are not counted.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// `201` answers.
    pub accepted: u64,
    /// The voucher's stock before the load.
    pub initial_stock: i64,
    /// Orders of the voucher before the load.
    pub orders_before: u64,
    /// Orders of the voucher after the load (and the drain).
    pub orders: u64,
    /// Orders the load added.
    pub new_orders: u64,
    pub remaining_stock: i64,
    /// Sold beyond the stock (new orders above it, or a negative stock).
    pub oversold: u64,
    /// Users holding more than one order of the voucher.
    pub duplicate_users: u64,
    /// Orders beyond each user's first.
    pub duplicate_orders: u64,
    /// Orders answered `201` that are not in the database.
    pub missing: u64,
    /// The first few missing order ids, with their users.
    pub missing_order_ids: Vec<String>,
    /// `initial − new orders − remaining` (stock moved without an order when
    /// positive); informative, not a violation.
    pub stock_drift: i64,
    /// How long the wait for the orders to reach the database took, in ms.
    pub drain_ms: u64,
    /// One sentence per violated rule.
    pub violations: Vec<String>,
    /// No violation: exit status 0.
    pub ok: bool,
}

impl LoadReport {
    /// Gathers the run's parts.
    pub(super) fn new(
        config: &LoadConfig,
        targets: &Targets,
        verified_via: &str,
        fired: &Fired,
        before: &Snapshot,
        drain: Duration,
        verdict: Verdict,
    ) -> Self {
        let seconds = fired.elapsed.as_secs_f64();
        let requests_per_sec = if seconds > 0.0 {
            fired.requests as f64 / seconds
        } else {
            0.0
        };
        Self {
            targets: targets.all().to_vec(),
            voucher: config.voucher,
            users: config.users,
            clicks: config.clicks,
            verified_via: verified_via.to_owned(),
            requests: fired.requests,
            elapsed_ms: millis(fired.elapsed),
            requests_per_sec: (requests_per_sec * 10.0).round() / 10.0,
            latency_us: LatencySummary::of(&fired.latency),
            statuses: fired.statuses.clone(),
            errors: fired.errors.clone(),
            accepted: fired.accepted.len() as u64 + fired.accepted_without_id,
            initial_stock: verdict.initial_stock,
            orders_before: before.orders.len() as u64,
            orders: verdict.orders,
            new_orders: verdict.new_orders,
            remaining_stock: verdict.remaining_stock,
            oversold: verdict.oversold,
            duplicate_users: verdict.duplicate_users,
            duplicate_orders: verdict.duplicate_orders,
            missing: verdict.missing,
            missing_order_ids: verdict.missing_order_ids,
            stock_drift: verdict.stock_drift,
            drain_ms: millis(drain),
            ok: verdict.violations.is_empty(),
            violations: verdict.violations,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn ms(micros: u64) -> String {
    format!("{:.1} ms", micros as f64 / 1000.0)
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "load: {} users x {} simultaneous clicks = {} requests over {} target(s), voucher {} (stock {})",
            self.users,
            self.clicks,
            self.requests,
            self.targets.len(),
            self.voucher,
            self.initial_stock
        )?;
        writeln!(
            f,
            "sent in {:.2} s: {:.0} req/s, latency p50 {}, p99 {}, max {}",
            self.elapsed_ms as f64 / 1000.0,
            self.requests_per_sec,
            ms(self.latency_us.p50),
            ms(self.latency_us.p99),
            ms(self.latency_us.max)
        )?;
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(status, count)| format!("{status} x{count}"))
            .collect();
        writeln!(f, "answers: {}", statuses.join(", "))?;
        if !self.errors.is_empty() {
            let errors: Vec<String> = self
                .errors
                .iter()
                .map(|(code, count)| format!("{code} x{count}"))
                .collect();
            writeln!(f, "refusals: {}", errors.join(", "))?;
        }
        writeln!(
            f,
            "verified via {}: {} orders ({} new), {} accepted, stock {} -> {} (drained in {} ms)",
            self.verified_via,
            self.orders,
            self.new_orders,
            self.accepted,
            self.initial_stock,
            self.remaining_stock,
            self.drain_ms
        )?;
        writeln!(
            f,
            "oversold {}, duplicate users {}, accepted but missing {}",
            self.oversold, self.duplicate_users, self.missing
        )?;
        if !self.missing_order_ids.is_empty() {
            writeln!(
                f,
                "missing order ids: {}",
                self.missing_order_ids.join(", ")
            )?;
        }
        if self.ok {
            writeln!(
                f,
                "OK: nothing oversold, no duplicate orders, no lost orders"
            )
        } else {
            for violation in &self.violations {
                writeln!(f, "VIOLATION: {violation}")?;
            }
            Ok(())
        }
    }
}

/// A bar on stderr counting answered requests, or a hidden one.
pub(super) fn progress_bar(visible: bool, total: u64) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed:>4} [{bar:40}] {pos}/{len} requests, eta {eta} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

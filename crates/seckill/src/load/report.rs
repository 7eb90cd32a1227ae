//! The load's report: what was sent, what came back, what the database
//! holds, as text for people and JSON for scripts.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::config::LoadConfig;
use super::fire::{Fired, Targets};
use super::mix::Action;
use super::source::Snapshot;
use super::verdict::Verdict;
use crate::db::OrderStatus;

/// Latency percentiles of a kind of request, in microseconds.
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

    /// `None` when nothing was recorded.
    fn of_any(histogram: &Histogram<u64>) -> Option<Self> {
        (!histogram.is_empty()).then(|| Self::of(histogram))
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
    /// `201` and `202` answers: orders placed.
    pub accepted: u64,
    /// Accepted orders per second of the load (follow-ups included in the time).
    pub accepted_per_sec: f64,
    /// The `--mix` ("pay=60,cancel=20,expire=20"), or "none" (buy only).
    pub mix: String,
    /// Answers to `POST /orders/{id}/pay` by status, plus "error" (no
    /// answer) and "unseen" (a `202` order that never showed: not sent).
    pub pay_answers: BTreeMap<String, u64>,
    /// Answers to `POST /orders/{id}/cancel`, keyed as `pay_answers`.
    pub cancel_answers: BTreeMap<String, u64>,
    /// Accepted orders the load did nothing with (left to expire).
    pub left_to_expire: u64,
    /// Latency of the pay requests; absent when none was sent.
    pub pay_latency_us: Option<LatencySummary>,
    /// Latency of the cancel requests; absent when none was sent.
    pub cancel_latency_us: Option<LatencySummary>,
    /// Orders of the voucher before the load.
    pub orders_before: u64,
    /// What the snapshots say: the counts and the violations, in the JSON
    /// beside the other keys (`orders`, `oversold`, `violations`...).
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Orders of the voucher after the load per status: "pending", "paid",
    /// "cancelled", "expired" (all four keys, 0 when none).
    pub final_statuses: BTreeMap<String, u64>,
    /// How long the wait for the orders to reach the database took, in ms.
    pub drain_ms: u64,
    /// `--expect-expiry-within`, in ms; absent without it.
    pub expect_expiry_within_ms: Option<u64>,
    /// How long the wait for the load's orders to leave `pending` took, in ms.
    pub expiry_wait_ms: u64,
    /// No violation: exit status 0.
    pub ok: bool,
    /// The Redis fault injected (`--outage`) and when; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<String>,
}

impl LoadReport {
    /// Gathers the run's parts.
    pub(super) fn new(
        config: &LoadConfig,
        targets: &Targets,
        verified_via: &str,
        fired: &Fired,
        (before, after): (&Snapshot, &Snapshot),
        (drain, expiry_wait): (Duration, Duration),
        verdict: Verdict,
    ) -> Self {
        let seconds = fired.elapsed.as_secs_f64();
        let per_sec = |n: u64| {
            let rate = if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            };
            (rate * 10.0).round() / 10.0
        };
        let accepted = fired.accepted.len() as u64 + fired.accepted_without_id;
        let mut pay_answers = BTreeMap::new();
        let mut cancel_answers = BTreeMap::new();
        let mut left_to_expire = 0;
        for order in &fired.accepted {
            let answers = match order.follow_up.action {
                Action::Pay => &mut pay_answers,
                Action::Cancel => &mut cancel_answers,
                Action::Leave => {
                    left_to_expire += 1;
                    continue;
                }
            };
            if let Some(answer) = order.follow_up.answer {
                *answers.entry(answer.key()).or_insert(0) += 1;
            }
        }
        Self {
            targets: targets.all().to_vec(),
            voucher: config.voucher,
            users: config.users,
            clicks: config.clicks,
            verified_via: verified_via.to_owned(),
            requests: fired.requests,
            elapsed_ms: millis(fired.elapsed),
            requests_per_sec: per_sec(fired.requests),
            latency_us: LatencySummary::of(&fired.latency),
            statuses: fired.statuses.clone(),
            errors: fired.errors.clone(),
            accepted,
            accepted_per_sec: per_sec(accepted),
            mix: config
                .mix
                .map_or_else(|| "none".to_owned(), |mix| mix.to_string()),
            pay_answers,
            cancel_answers,
            left_to_expire,
            pay_latency_us: LatencySummary::of_any(&fired.pay_latency),
            cancel_latency_us: LatencySummary::of_any(&fired.cancel_latency),
            orders_before: before.orders.len() as u64,
            final_statuses: after
                .count_by_status()
                .into_iter()
                .map(|(status, n)| (status.as_str().to_owned(), n))
                .collect(),
            drain_ms: millis(drain),
            expect_expiry_within_ms: config.expect_expiry_within.map(millis),
            expiry_wait_ms: millis(expiry_wait),
            // Before `verdict` moves into the report.
            ok: verdict.violations.is_empty(),
            verdict,
            outage: None,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn ms(micros: u64) -> String {
    format!("{:.1} ms", micros as f64 / 1000.0)
}

/// "200 x30, 409 x1", or "none".
fn answers(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    let listed: Vec<String> = counts
        .iter()
        .map(|(key, count)| format!("{key} x{count}"))
        .collect();
    listed.join(", ")
}

/// "p50 1.2 ms, p99 3.4 ms", or "-".
fn latency(summary: Option<LatencySummary>) -> String {
    summary.map_or_else(
        || "-".to_owned(),
        |summary| format!("p50 {}, p99 {}", ms(summary.p50), ms(summary.p99)),
    )
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
            self.verdict.initial_stock
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
        if let Some(outage) = &self.outage {
            writeln!(f, "outage: {outage}")?;
        }
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
        if self.mix != "none" {
            writeln!(
                f,
                "follow-ups ({}): pay {}; cancel {}; left to expire {}",
                self.mix,
                answers(&self.pay_answers),
                answers(&self.cancel_answers),
                self.left_to_expire
            )?;
            writeln!(
                f,
                "pay latency {}; cancel latency {}; {:.0} orders/s",
                latency(self.pay_latency_us),
                latency(self.cancel_latency_us),
                self.accepted_per_sec
            )?;
        }
        writeln!(
            f,
            "verified via {}: {} orders ({} new), {} accepted, stock {} -> {} (drained in {} ms)",
            self.verified_via,
            self.verdict.orders,
            self.verdict.new_orders,
            self.accepted,
            self.verdict.initial_stock,
            self.verdict.remaining_stock,
            self.drain_ms
        )?;
        // In the life's order, not the map's alphabetical one.
        let final_statuses: Vec<String> = OrderStatus::ALL
            .iter()
            .map(|status| {
                let count = self.final_statuses.get(status.as_str()).unwrap_or(&0);
                format!("{status} {count}")
            })
            .collect();
        let expiry = match self.expect_expiry_within_ms {
            Some(_) => format!(", waited {} ms for expiry", self.expiry_wait_ms),
            None => String::new(),
        };
        writeln!(
            f,
            "final statuses: {}; units held {}, stock drift {}{expiry}",
            final_statuses.join(", "),
            self.verdict.holding,
            self.verdict.stock_drift
        )?;
        writeln!(
            f,
            "oversold {}, duplicate users {}, accepted but missing {}, wrong final status {}",
            self.verdict.oversold,
            self.verdict.duplicate_users,
            self.verdict.missing,
            self.verdict.wrong_status
        )?;
        if !self.verdict.missing_order_ids.is_empty() {
            writeln!(
                f,
                "missing order ids: {}",
                self.verdict.missing_order_ids.join(", ")
            )?;
        }
        if !self.verdict.wrong_status_orders.is_empty() {
            writeln!(
                f,
                "wrong final status: {}",
                self.verdict.wrong_status_orders.join("; ")
            )?;
        }
        if self.ok {
            writeln!(
                f,
                "OK: nothing oversold, no duplicate orders, no lost orders, stock conserved, every order ended as answered"
            )
        } else {
            for violation in &self.verdict.violations {
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

//! The figures of one contended window: throughput, hand-off latency to
//! another waiter, the longest wait, and how evenly waiters were served.

use serde::Serialize;

use crate::stats::{nanos_histogram, quantile_us};
use crate::workload::{Acquisition, ContendLog};

/// Figures of one contended run.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffStats {
    pub acquisitions_per_sec: f64,
    /// Acquisitions where the holder changed.
    pub handoffs: f64,
    /// Share of acquisitions that went to another waiter than the last holder.
    pub handoff_share: f64,
    /// Next holder's acquire returned − previous holder's release returned.
    pub handoff_p50_us: f64,
    pub handoff_p99_us: f64,
    /// The same from the previous holder's release call: the whole hand-off,
    /// release round trip included.
    pub from_call_p50_us: f64,
    pub from_call_p99_us: f64,
    /// Longest time any waiter spent in one acquire (unfinished waits count
    /// up to the end of the window).
    pub longest_wait_ms: f64,
    pub per_waiter_min: f64,
    pub per_waiter_max: f64,
    /// max/min acquisitions per waiter; infinite when a waiter never got it.
    pub per_waiter_ratio: f64,
    /// Acquisitions whose order breaks first-come first-served: the lock went
    /// to a waiter that called acquire more than [`FIFO_SLACK_NS`] after
    /// another waiter still waiting.
    pub fifo_violations: f64,
    pub errors: f64,
}

impl HandoffStats {
    /// Figures of `log`, for `waiters` waiters and the window
    /// `start_ns..deadline_ns`.
    pub fn of(log: &ContendLog, waiters: u32, start_ns: u64, deadline_ns: u64) -> HandoffStats {
        // An acquire that returned after the window closed (a poller's
        // last try) is a wait that did not finish inside it.
        let (mut acquisitions, late): (Vec<Acquisition>, Vec<Acquisition>) = log
            .acquisitions
            .iter()
            .copied()
            .partition(|a| a.acquired <= deadline_ns);
        acquisitions.sort_by_key(|a| a.acquired);
        let window_s = (deadline_ns.saturating_sub(start_ns)) as f64 / 1e9;
        let (mut histogram, mut from_call) = (nanos_histogram(), nanos_histogram());
        for pair in acquisitions.windows(2) {
            let (previous, next) = (&pair[0], &pair[1]);
            if previous.waiter != next.waiter {
                // The next holder may learn of the release before the
                // releaser reads its answer (another task, another process):
                // such a hand-off counts as 1 ns, not as a negative time.
                histogram.saturating_record(next.acquired.saturating_sub(previous.released).max(1));
                from_call.saturating_record(
                    next.acquired.saturating_sub(previous.release_called).max(1),
                );
            }
        }
        let finished = acquisitions.iter().map(|a| a.acquired - a.called);
        let unfinished = log
            .unfinished_since
            .iter()
            .chain(late.iter().map(|a| &a.called))
            .map(|since| deadline_ns.saturating_sub(*since));
        let longest_wait = finished.chain(unfinished).max().unwrap_or(0);
        let mut counts = vec![0u64; waiters as usize];
        for a in &acquisitions {
            if let Some(count) = counts.get_mut(a.waiter as usize) {
                *count += 1;
            }
        }
        let min = counts.iter().min().copied().unwrap_or(0) as f64;
        let max = counts.iter().max().copied().unwrap_or(0) as f64;
        let handoffs = histogram.len() as f64;
        HandoffStats {
            acquisitions_per_sec: acquisitions.len() as f64 / window_s.max(1e-9),
            handoffs,
            handoff_share: handoffs / (acquisitions.len().max(2) - 1) as f64,
            handoff_p50_us: quantile_us(&histogram, 0.50),
            handoff_p99_us: quantile_us(&histogram, 0.99),
            from_call_p50_us: quantile_us(&from_call, 0.50),
            from_call_p99_us: quantile_us(&from_call, 0.99),
            longest_wait_ms: longest_wait as f64 / 1e6,
            per_waiter_min: min,
            per_waiter_max: max,
            per_waiter_ratio: if min > 0.0 { max / min } else { f64::INFINITY },
            fifo_violations: fifo_violations(&acquisitions) as f64,
            errors: log.errors.count as f64,
        }
    }
}

/// Calls closer together than this may reach Redis in either order (the
/// request is sent after the clock read), so they do not count as overtaking.
pub const FIFO_SLACK_NS: u64 = 1_000_000;

/// Counts acquisitions granted while a caller that called more than
/// [`FIFO_SLACK_NS`] earlier was still waiting. `sorted` is ordered by `acquired`.
fn fifo_violations(sorted: &[Acquisition]) -> usize {
    // B overtakes A when B.called > A.called + slack and B.acquired <
    // A.acquired: walking back from the last acquisition, keep the
    // earliest call among those acquired later.
    let mut violations = 0;
    let mut earliest_later_call = u64::MAX;
    for a in sorted.iter().rev() {
        if a.called > earliest_later_call.saturating_add(FIFO_SLACK_NS) {
            violations += 1;
        }
        earliest_later_call = earliest_later_call.min(a.called);
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acq(waiter: u32, called: u64, acquired: u64, released: u64) -> Acquisition {
        Acquisition {
            waiter,
            called,
            acquired,
            release_called: released,
            released,
        }
    }

    #[test]
    fn handoff_counts_only_changes_of_holder() {
        let log = ContendLog {
            acquisitions: vec![
                acq(0, 0, 10, 20),
                acq(0, 20, 25, 30), // the same waiter again: not a hand-off
                acq(1, 0, 1_030, 1_040),
            ],
            unfinished_since: vec![],
            errors: Default::default(),
        };
        let stats = HandoffStats::of(&log, 2, 0, 1_000_000_000);
        assert_eq!(stats.handoffs, 1.0);
        assert!((stats.handoff_p50_us - 1.0).abs() < 0.01, "{stats:?}");
        assert_eq!(stats.per_waiter_ratio, 2.0);
    }

    #[test]
    fn unfinished_waits_count_to_the_end_of_the_window() {
        let log = ContendLog {
            acquisitions: vec![acq(0, 0, 10, 20)],
            unfinished_since: vec![100_000_000],
            errors: Default::default(),
        };
        let stats = HandoffStats::of(&log, 2, 0, 1_000_000_000);
        assert!((stats.longest_wait_ms - 900.0).abs() < 1e-6);
        assert!(stats.per_waiter_ratio.is_infinite());
    }

    #[test]
    fn an_acquire_returning_after_the_window_is_an_unfinished_wait() {
        let log = ContendLog {
            acquisitions: vec![
                acq(0, 0, 10, 20),
                acq(1, 200_000_000, 1_100_000_000, 1_100_000_001),
            ],
            unfinished_since: vec![],
            errors: Default::default(),
        };
        let stats = HandoffStats::of(&log, 2, 0, 1_000_000_000);
        assert_eq!(stats.acquisitions_per_sec, 1.0);
        assert!((stats.longest_wait_ms - 800.0).abs() < 1e-6);
        assert_eq!(stats.handoffs, 0.0);
    }

    #[test]
    fn overtaking_a_waiting_caller_is_a_fifo_violation() {
        const MS: u64 = 1_000_000;
        let fair = [
            acq(0, 0, 10 * MS, 11 * MS),
            acq(1, 5 * MS, 12 * MS, 13 * MS),
            acq(2, 7 * MS, 14 * MS, 15 * MS),
        ];
        assert_eq!(fifo_violations(&fair), 0);
        // Waiter 2 called 2 ms after waiter 1 but got the lock first.
        let unfair = [
            acq(0, 0, 10 * MS, 11 * MS),
            acq(2, 7 * MS, 12 * MS, 13 * MS),
            acq(1, 5 * MS, 14 * MS, 15 * MS),
        ];
        assert_eq!(fifo_violations(&unfair), 1);
        // Calls within the slack may reach Redis in either order.
        let close = [
            acq(2, 5 * MS + 1, 12 * MS, 13 * MS),
            acq(1, 5 * MS, 14 * MS, 15 * MS),
        ];
        assert_eq!(fifo_violations(&close), 0);
    }
}

//! When the loss watch reads a key again after an invalidation.
//!
//! Each read tracks the key again, and the server may answer that with one
//! more invalidation at once: when its tracking table is full
//! (`tracking-table-max-keys`, shared with every client-side cache on the
//! server) it evicts a tracked key, with an invalidation, for each key it
//! starts tracking. Read at once every time, the watch's reads would feed
//! themselves for ever. So a key invalidated again soon ([`QUICK`]) after a
//! read found it unchanged earns a strike, and each strike doubles the
//! delay before the next read, up to [`SLOWEST_REREAD`]; an invalidation
//! that comes later takes a strike back. A key that changes rarely (a
//! renewal every lease/3 of 300 ms or more, a real loss) is read at once; a
//! key in an eviction chain is read at most once per [`SLOWEST_REREAD`],
//! which is also how late its loss may then be found.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// An invalidation this soon after a read that found the key unchanged is
/// the server's doing (an eviction), not a change: renewals of leases of
/// 300 ms or more come further apart.
pub(crate) const QUICK: Duration = Duration::from_millis(100);

/// The delay the first strike earns; each further strike doubles it.
const FIRST_DELAY: Duration = Duration::from_millis(10);

/// The longest a watched key waits for its next read, however often the
/// server invalidates it: the bound on finding a loss under a full
/// tracking table.
pub(crate) const SLOWEST_REREAD: Duration = Duration::from_secs(1);

/// The strikes that reach [`SLOWEST_REREAD`] (10 ms × 2⁷ > 1 s).
const MOST_STRIKES: u8 = 8;

/// The re-read pace of one watched hold's key. Six bytes: a client may
/// watch many thousands of holds.
#[derive(Default, Clone, Copy, Debug, PartialEq)]
pub(crate) struct Pacing {
    /// When a read last found the key unchanged, in ms after the
    /// process's first pacing ([`millis`]), plus one; 0: never. It wraps
    /// after 49 days: a key read exactly a multiple of that apart may be
    /// taken for a quick invalidation once, which only delays one read.
    read_at: u32,
    /// Earned by invalidations soon after a read (a full table's evictions).
    strikes: u8,
    /// Reads that failed in a row (an error about the key: a cluster slot
    /// failing over, a server loading): they space the next read out, and a
    /// read that succeeds forgets them, so they never slow the reads of a
    /// later change.
    failures: u8,
}

/// `now` in ms after the first instant any pacing read, wrapping.
fn millis(now: Instant) -> u32 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| now);
    now.saturating_duration_since(epoch).as_millis() as u32
}

impl Pacing {
    /// The pace from its parts, as [`Pacing::parts`] gave them (a hold
    /// keeps them in fields of its own: `Hold::pace`).
    pub(crate) fn of_parts((read_at, strikes, failures): (u32, u8, u8)) -> Pacing {
        Pacing {
            read_at,
            strikes,
            failures,
        }
    }

    pub(crate) fn parts(self) -> (u32, u8, u8) {
        (self.read_at, self.strikes, self.failures)
    }

    /// The key was invalidated at `now`: how long to wait before reading it.
    pub(crate) fn invalidated(&mut self, now: Instant) -> Duration {
        let soon = self.read_at != 0
            && u128::from(millis(now).wrapping_sub(self.read_at - 1)) < QUICK.as_millis();
        if soon {
            self.strike();
        } else {
            self.strikes = self.strikes.saturating_sub(1);
        }
        self.delay()
    }

    /// A read at `now` found the key unchanged (and tracks it again).
    pub(crate) fn found_unchanged(&mut self, now: Instant) {
        self.read_at = millis(now).wrapping_add(1).max(1);
        self.failures = 0;
    }

    /// A read got an error about this key (not about the connection): it
    /// may not be tracked, so it is read again, after a growing delay.
    pub(crate) fn read_failed(&mut self) -> Duration {
        self.failures = (self.failures + 1).min(MOST_STRIKES);
        delay_for(self.failures.max(self.strikes))
    }

    fn strike(&mut self) {
        self.strikes = (self.strikes + 1).min(MOST_STRIKES);
    }

    fn delay(&self) -> Duration {
        delay_for(self.strikes)
    }
}

/// The delay `strikes` earn: none for none, then [`FIRST_DELAY`] doubling
/// up to [`SLOWEST_REREAD`].
fn delay_for(strikes: u8) -> Duration {
    match strikes {
        0 => Duration::ZERO,
        strikes => FIRST_DELAY
            .saturating_mul(1 << (strikes - 1))
            .min(SLOWEST_REREAD),
    }
}

/// Keys due for a delayed read, earliest first, each at most once.
#[derive(Default)]
pub(crate) struct Rereads {
    due: BTreeSet<(Instant, Arc<str>)>,
    at: HashMap<Arc<str>, Instant>,
}

impl Rereads {
    /// Reads `key` at `at`, or at the earlier time it is already due.
    pub(crate) fn schedule(&mut self, key: Arc<str>, at: Instant) {
        match self.at.get(&key) {
            Some(earlier) if *earlier <= at => {}
            Some(later) => {
                self.due.remove(&(*later, key.clone()));
                self.due.insert((at, key.clone()));
                self.at.insert(key, at);
            }
            None => {
                self.due.insert((at, key.clone()));
                self.at.insert(key, at);
            }
        }
    }

    /// When the next read is due.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// The keys due by `now`, taken out.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<Arc<str>> {
        let mut keys = Vec::new();
        while self.due.first().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, key)) = self.due.pop_first() {
                self.at.remove(&key);
                keys.push(key);
            }
        }
        if self.at.is_empty() {
            // A burst of delayed keys leaves no room behind it.
            self.at.shrink_to(16);
        }
        keys
    }

    /// Forgets every delayed read (a new connection reads every key anyway).
    pub(crate) fn clear(&mut self) {
        self.due.clear();
        self.at.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_invalidated_right_after_each_read_waits_longer_each_time_up_to_the_cap() {
        let mut pacing = Pacing::default();
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..12 {
            pacing.found_unchanged(now);
            now += Duration::from_millis(1);
            delays.push(pacing.invalidated(now));
        }
        assert_eq!(delays[0], FIRST_DELAY);
        assert!(delays.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(delays[11], SLOWEST_REREAD);
    }

    #[test]
    fn a_key_invalidated_rarely_is_read_at_once() {
        let mut pacing = Pacing::default();
        let mut now = Instant::now();
        assert_eq!(pacing.invalidated(now), Duration::ZERO);
        for _ in 0..5 {
            pacing.found_unchanged(now);
            // A renewal every lease/3 of a 300 ms lease.
            now += QUICK;
            assert_eq!(pacing.invalidated(now), Duration::ZERO);
        }
    }

    #[test]
    fn calm_invalidations_take_the_strikes_back() {
        let mut pacing = Pacing::default();
        let mut now = Instant::now();
        for _ in 0..3 {
            pacing.found_unchanged(now);
            pacing.invalidated(now);
        }
        for _ in 0..3 {
            pacing.found_unchanged(now);
            now += Duration::from_secs(2);
            pacing.invalidated(now);
        }
        assert_eq!(pacing.delay(), Duration::ZERO);
    }

    #[test]
    fn a_key_that_cannot_be_read_is_read_again_later_and_later() {
        let mut pacing = Pacing::default();
        let first = pacing.read_failed();
        let second = pacing.read_failed();
        assert!(Duration::ZERO < first && first < second);
    }

    /// Issue 38: reads that failed while a cluster slot failed over left
    /// their strikes behind, and the next real loss of the key was read
    /// 320 ms late.
    #[test]
    fn failed_reads_followed_by_a_good_one_never_delay_the_next_change() {
        let mut pacing = Pacing::default();
        let mut now = Instant::now();
        for _ in 0..6 {
            assert!(pacing.read_failed() > Duration::ZERO);
        }
        now += Duration::from_secs(1);
        pacing.found_unchanged(now);
        now += Duration::from_secs(3);
        assert_eq!(pacing.invalidated(now), Duration::ZERO);
    }

    #[test]
    fn a_key_is_due_once_at_its_earliest_time() {
        let mut rereads = Rereads::default();
        let key: Arc<str> = Arc::from("k");
        let now = Instant::now();
        rereads.schedule(key.clone(), now + Duration::from_millis(50));
        rereads.schedule(key.clone(), now + Duration::from_millis(80));
        rereads.schedule(key.clone(), now + Duration::from_millis(20));
        assert_eq!(rereads.next(), Some(now + Duration::from_millis(20)));
        assert!(rereads.take_due(now + Duration::from_millis(10)).is_empty());
        assert_eq!(
            rereads.take_due(now + Duration::from_millis(100)),
            vec![key]
        );
        assert_eq!(rereads.next(), None);
    }
}

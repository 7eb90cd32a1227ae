//! One refresh of `top`: the locks held now (as `list` finds them, on one
//! server or over Redlock masters), with what only a watcher can tell: how
//! fast each lock changes hands and how long its waiters have been waiting.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::table::{self, SortKey};
use crate::Global;
use crate::exit::Failure;
use crate::locks::{self, LockView, Source};

/// One refresh, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// When it was taken, Unix milliseconds.
    pub at: u64,
    /// False for a refresh that reached Redis.
    pub disconnected: bool,
    /// Why Redis could not be read (only when disconnected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The locks, in the order of `--sort` (empty when disconnected).
    pub locks: Vec<TopLock>,
}

impl Snapshot {
    /// A refresh that could not reach Redis.
    pub fn disconnected(error: &Failure) -> Snapshot {
        Snapshot {
            at: unix_millis(),
            disconnected: true,
            error: Some(
                error
                    .to_string()
                    .trim_start_matches("redlatch: ")
                    .to_owned(),
            ),
            locks: Vec::new(),
        }
    }
}

/// One lock in a refresh: `status --json`'s object, and what `top` adds.
#[derive(Debug, Clone, Serialize)]
pub struct TopLock {
    /// The lock as `status --json` shows it.
    #[serde(flatten)]
    pub lock: LockView,
    /// `lock`, `read-write` or `fair` (a fair lock shows as such while
    /// someone is in its line).
    pub kind: &'static str,
    /// Waiting clients, or the fair lock's places in line.
    pub waiters: u64,
    /// Fresh acquisitions per second since the previous refresh (from the
    /// fencing token's growth); `null` on the first refresh of a lock.
    pub acquisitions_per_s: Option<f64>,
    /// How long the lock has had waiters without a break, as seen by this
    /// watcher (to within one interval); 0 when nobody waits.
    pub longest_wait_ms: u64,
}

impl TopLock {
    /// The holders for people, each with what it says about itself first.
    pub fn holders_text(&self) -> String {
        let text = self.lock.holders_text();
        match &self.lock.masters {
            Some(masters) if self.lock.held => format!(
                "{text} ({}/{} masters)",
                self.lock.holding_masters(),
                masters.nodes.len()
            ),
            Some(masters) => format!("no majority ({} needed)", masters.quorum),
            None => text,
        }
    }
}

/// What the previous refreshes saw of one lock.
struct Seen {
    token: Option<u64>,
    at: Instant,
    waited_since: Option<Instant>,
}

/// Takes refreshes and remembers what it needs from the last ones. It
/// connects on its first refresh, and again after a failed connect.
pub struct Sampler<'a> {
    global: &'a Global,
    source: Option<Source>,
    prefix: String,
    /// How the locks are ordered.
    pub sort: SortKey,
    seen: HashMap<String, Seen>,
}

impl<'a> Sampler<'a> {
    /// A sampler of the locks under `prefix`, not connected yet.
    pub fn new(global: &'a Global, prefix: String, sort: SortKey) -> Sampler<'a> {
        Sampler {
            global,
            source: None,
            prefix,
            sort,
            seen: HashMap::new(),
        }
    }

    /// Lists the locks now and derives the rates from the last refresh.
    pub async fn sample(&mut self) -> Result<Snapshot, Failure> {
        let source = match &mut self.source {
            Some(source) => source,
            slot => slot.insert(locks::connect_source(self.global, "top").await?),
        };
        source.reconnect_failed().await;
        let locks = source.locks(self.global, "top", &self.prefix).await?;
        let now = Instant::now();
        let mut rows: Vec<TopLock> = locks.into_iter().map(|lock| self.row(lock, now)).collect();
        // Locks gone from the listing keep their memory for a while: a lock
        // free at this refresh may be taken again at the next.
        self.seen
            .retain(|_, seen| now.duration_since(seen.at) < Duration::from_secs(60));
        table::sort(&mut rows, self.sort);
        Ok(Snapshot {
            at: unix_millis(),
            disconnected: false,
            error: None,
            locks: rows,
        })
    }

    fn row(&mut self, lock: LockView, now: Instant) -> TopLock {
        let waiters = if lock.line.is_empty() {
            lock.waiting
        } else {
            lock.line.len() as u64
        };
        let previous = self.seen.get(&lock.name);
        let acquisitions_per_s = previous.and_then(|seen| {
            let elapsed = now.duration_since(seen.at).as_secs_f64();
            let grown = lock.token?.saturating_sub(seen.token?);
            (elapsed > 0.0).then(|| grown as f64 / elapsed)
        });
        let waited_since = match (waiters, previous.and_then(|seen| seen.waited_since)) {
            (0, _) => None,
            (_, Some(since)) => Some(since),
            (_, None) => Some(now),
        };
        self.seen.insert(
            lock.name.clone(),
            Seen {
                token: lock.token,
                at: now,
                waited_since,
            },
        );
        let kind = if lock.mode.is_some() {
            "read-write"
        } else if !lock.line.is_empty() {
            "fair"
        } else {
            "lock"
        };
        TopLock {
            lock,
            kind,
            waiters,
            acquisitions_per_s,
            longest_wait_ms: waited_since.map_or(0, |since| {
                u64::try_from(now.duration_since(since).as_millis()).unwrap_or(u64::MAX)
            }),
        }
    }
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

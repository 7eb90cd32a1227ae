//! One refresh of `top`: the locks held now (as `list` finds them, on one
//! server or over Redlock masters), with what only a watcher can tell: how
//! fast each lock changes hands and how long its waiters have been waiting.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::row::TopLock;
use super::table::{self, SortKey};
use crate::exit::{self, Failure};
use crate::global::Global;
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

/// Whether a failed refresh is shown and retried rather than the end: Redis
/// unreachable or not answering, except for `--once`. A mistake of ours (a
/// bad flag or file) ends `top` at once.
pub fn retried(failure: &Failure, once: bool) -> bool {
    !once && failure.code == exit::UNAVAILABLE
}

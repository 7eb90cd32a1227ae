//! One refresh of `top`: the locks Redis holds now (the library's
//! SCAN-based listing, every master of a cluster), with what only a
//! watcher can tell: how fast each lock changes hands and how long its
//! waiters have been waiting.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlatch::{Client, LockStatus};
use serde::Serialize;

use crate::exit::Failure;

/// One refresh, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// When it was taken, Unix milliseconds.
    pub at: u64,
    /// The locks, most contended first.
    pub locks: Vec<Row>,
}

/// One lock in a refresh.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    /// `lock`, `read-write` or `fair` (a fair lock shows as such while
    /// someone is in its line).
    pub kind: &'static str,
    /// `owner xCOUNT` for each holder.
    pub holders: Vec<String>,
    /// Waiting clients: processes with a waiter on the lock, or the fair
    /// lock's places in line.
    pub waiters: u64,
    /// Remaining lease; `null` when the key has no expiry.
    pub ttl_ms: Option<u64>,
    /// The last fencing token handed out.
    pub token: Option<u64>,
    /// Fresh acquisitions per second since the previous refresh (from the
    /// fencing token's growth); `null` on the first refresh of a lock.
    pub acquisitions_per_s: Option<f64>,
    /// How long the lock has had waiters without a break, as seen by this
    /// watcher (to within one interval); 0 when nobody waits.
    pub longest_wait_ms: u64,
}

/// What the previous refreshes saw of one lock.
struct Seen {
    token: Option<u64>,
    at: Instant,
    waited_since: Option<Instant>,
}

/// Takes refreshes and remembers what it needs from the last ones.
pub struct Sampler {
    client: Client,
    prefix: String,
    seen: HashMap<String, Seen>,
}

impl Sampler {
    pub fn new(client: Client, prefix: String) -> Sampler {
        Sampler {
            client,
            prefix,
            seen: HashMap::new(),
        }
    }

    /// Lists the locks now and derives the rates from the last refresh.
    pub async fn sample(&mut self) -> Result<Snapshot, Failure> {
        let locks = self
            .client
            .locks(&self.prefix)
            .await
            .map_err(|error| Failure::lib("top", &error))?;
        let now = Instant::now();
        let mut rows: Vec<Row> = locks.iter().map(|lock| self.row(lock, now)).collect();
        // Locks gone from the listing keep their memory for a while: a lock
        // free at this refresh may be taken again at the next.
        self.seen
            .retain(|_, seen| now.duration_since(seen.at) < Duration::from_secs(60));
        rows.sort_by(|a, b| {
            b.waiters
                .cmp(&a.waiters)
                .then(rate(b).total_cmp(&rate(a)))
                .then_with(|| a.name.cmp(&b.name))
        });
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            });
        Ok(Snapshot { at, locks: rows })
    }

    fn row(&mut self, lock: &LockStatus, now: Instant) -> Row {
        let waiters = if lock.line.is_empty() {
            lock.waiting_clients
        } else {
            lock.line.len() as u64
        };
        let previous = self.seen.get(&lock.name);
        let acquisitions_per_s = previous.and_then(|seen| {
            let elapsed = now.duration_since(seen.at).as_secs_f64();
            let grown = lock.last_token?.saturating_sub(seen.token?);
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
                token: lock.last_token,
                at: now,
                waited_since,
            },
        );
        Row {
            name: lock.name.clone(),
            kind: if lock.mode.is_some() {
                "read-write"
            } else if !lock.line.is_empty() {
                "fair"
            } else {
                "lock"
            },
            holders: lock
                .holders
                .iter()
                .map(|holder| format!("{} x{}", holder.owner, holder.count))
                .collect(),
            waiters,
            ttl_ms: lock
                .ttl
                .map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            token: lock.last_token,
            acquisitions_per_s,
            longest_wait_ms: waited_since.map_or(0, |since| {
                u64::try_from(now.duration_since(since).as_millis()).unwrap_or(u64::MAX)
            }),
        }
    }
}

fn rate(row: &Row) -> f64 {
    row.acquisitions_per_s.unwrap_or(0.0)
}

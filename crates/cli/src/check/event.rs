//! What happened during a run: one event per line, JSON, per process.
//!
//! Workers append to their own file with one `write(2)` per event, so a
//! worker killed with `SIGKILL` loses nothing it had logged. The lab's own
//! events (faults injected, workers stopped or killed) are kept in memory.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::clock::now_ns;

/// One event: when (monotonic ns), who (a worker id, or `None` for the lab), what.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Nanoseconds on the system-wide monotonic clock.
    pub t: u64,
    /// The worker, or `None` for the lab.
    pub w: Option<u32>,
    /// What happened.
    pub what: What,
}

/// The kinds of events.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum What {
    /// The worker is connected and about to loop.
    Ready,
    /// The worker starts trying to take the lock.
    AcquireStart,
    /// The lock was taken; `token` is its fencing token, if the recipe has one.
    Acquired { token: Option<u64> },
    /// The worker read the shared counter.
    Read { value: i64 },
    /// The store answered a write of `read + 1` sent at `sent` (`t` is when
    /// the answer came): it found `found`, and accepted the write or
    /// (fenced mode) rejected it.
    Write {
        sent: u64,
        token: Option<u64>,
        read: i64,
        found: i64,
        accepted: bool,
    },
    /// The recipe said the lock was no longer held: the write was skipped.
    Lost,
    /// The worker starts releasing; it no longer acts as a holder.
    ReleaseStart,
    /// The release answered: `ok` is false when the lock was not ours any more.
    Released { ok: bool },
    /// A call to Redis failed.
    Error { message: String },
    /// The worker stops itself at a fault point (the lab then acts on it).
    Stopping { point: String },
    /// The worker runs again after stopping itself.
    Continued,
    /// The lab paused a worker.
    Paused { worker: u32 },
    /// The lab let a paused worker run again.
    Resumed { worker: u32 },
    /// The lab killed a worker with SIGKILL.
    Killed { worker: u32 },
    /// The lab injected a fault on a server.
    Fault { what: String },
}

impl Event {
    /// An event happening now.
    pub fn now(w: Option<u32>, what: What) -> Event {
        Event {
            t: now_ns(),
            w,
            what,
        }
    }
}

/// A worker's append-only event file.
#[derive(Debug)]
pub struct EventLog {
    file: File,
    worker: u32,
}

impl EventLog {
    /// Opens (creates) `path` for `worker`'s events.
    pub fn create(path: &Path, worker: u32) -> std::io::Result<EventLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventLog { file, worker })
    }

    /// Logs `what` as happening now.
    pub fn log(&mut self, what: What) {
        self.log_at(now_ns(), what);
    }

    /// Logs `what` as having happened at `t`.
    pub fn log_at(&mut self, t: u64, what: What) {
        let event = Event {
            t,
            w: Some(self.worker),
            what,
        };
        if let Ok(mut line) = serde_json::to_string(&event) {
            line.push('\n');
            // One write per line: a kill between two events loses neither.
            let _ = self.file.write_all(line.as_bytes());
        }
    }
}

/// Every event of one file; a line cut short by a kill is skipped.
pub fn read_events(path: &Path) -> std::io::Result<Vec<Event>> {
    let file = File::open(path)?;
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str(&line).ok())
        .collect())
}

/// One event in words.
pub fn describe(what: &What) -> String {
    match what {
        What::Ready => "ready".to_owned(),
        What::AcquireStart => "tries to acquire".to_owned(),
        What::Acquired { token: Some(token) } => format!("acquired the lock (token {token})"),
        What::Acquired { token: None } => "acquired the lock".to_owned(),
        What::Read { value } => format!("read counter = {value}"),
        What::Write {
            token,
            read,
            found,
            accepted,
            ..
        } => {
            let new = read + 1;
            match (accepted, found == read) {
                (true, true) => format!("wrote {new}"),
                (true, false) => format!(
                    "wrote {new} (read {read}, but the store held {found}): the update that made {found} is lost"
                ),
                (false, _) => format!(
                    "write of {new} REJECTED: token {} is below one the store accepted",
                    token.map_or_else(|| "-".to_owned(), |token| token.to_string())
                ),
            }
        }
        What::Lost => "sees the lock lost; skips its write".to_owned(),
        What::ReleaseStart => "releases".to_owned(),
        What::Released { ok: true } => "released (deleted the lock key)".to_owned(),
        What::Released { ok: false } => "release: the lock was no longer its own".to_owned(),
        What::Error { message } => format!("error: {message}"),
        What::Stopping { point } => format!("stops itself at {point} (SIGSTOP)"),
        What::Continued => "runs again".to_owned(),
        What::Paused { worker } => format!("keeps w{worker} stopped"),
        What::Resumed { worker } => format!("SIGCONT w{worker}"),
        What::Killed { worker } => format!("kill -9 w{worker}"),
        What::Fault { what } => what.clone(),
    }
}

//! The shared resource the workers protect: a counter on a server of its
//! own (never faulted), updated by a script that records every write and,
//! in fenced mode, refuses a fencing token lower than the highest it has
//! accepted.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::recipes::commands::{connect, query};

/// The counter every critical section increments.
pub const COUNTER_KEY: &str = "lab:counter";
/// The highest fencing token the store has accepted.
pub const FENCE_KEY: &str = "lab:fence";
/// Every write, in order: `worker token read found accepted|rejected`.
pub const LOG_KEY: &str = "lab:writes";

/// The answer to a write.
#[derive(Debug, Clone, Copy)]
pub struct WriteOutcome {
    /// False when refused for an old fencing token.
    pub accepted: bool,
    /// The counter's value just before the write; differs from the value
    /// the writer read when someone else wrote in between (a lost update
    /// if the write was accepted).
    pub found: i64,
}

/// A worker's connection to the store.
pub struct Resource {
    conn: ConnectionManager,
    write: redis::Script,
    fenced: bool,
}

impl Resource {
    /// Connects to the store at `url`; `fenced` turns token checks on.
    pub async fn connect(url: &str, fenced: bool) -> Result<Resource, String> {
        Ok(Resource {
            conn: connect(url, Duration::from_secs(2)).await?,
            write: redis::Script::new(include_str!("scripts/resource_write.lua")),
            fenced,
        })
    }

    /// The counter's current value.
    pub async fn read(&mut self) -> Result<i64, String> {
        let value: Option<i64> = query(&mut self.conn, redis::cmd("GET").arg(COUNTER_KEY)).await?;
        Ok(value.unwrap_or(0))
    }

    /// Writes `read + 1` for `worker`, holding `token` (if any).
    pub async fn write(
        &mut self,
        worker: u32,
        token: Option<u64>,
        read: i64,
    ) -> Result<WriteOutcome, String> {
        let (accepted, found): (i64, i64) = self
            .write
            .key(COUNTER_KEY)
            .key(FENCE_KEY)
            .key(LOG_KEY)
            .arg(worker)
            .arg(token.map(|token| token.to_string()).unwrap_or_default())
            .arg(read)
            .arg(if self.fenced { "1" } else { "0" })
            .invoke_async(&mut self.conn)
            .await
            .map_err(|error| error.to_string())?;
        Ok(WriteOutcome {
            accepted: accepted == 1,
            found,
        })
    }
}

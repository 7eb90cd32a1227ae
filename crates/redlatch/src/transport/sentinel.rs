//! The connection to the master Sentinel names, which follows failovers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::unpoisoned::Mutex;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::settings::SharedSettings;

/// A connection to the master Sentinel names, dropped and looked up again
/// after an error that suggests the master moved.
///
/// redis-rs does not follow Sentinel's `+switch-master` announcements: a
/// connection to the old master stays put until it breaks (the master died)
/// or refuses writes (`READONLY`: it was demoted to a replica). Either error
/// makes the next call ask Sentinel for the master again. A call refused
/// with `READONLY` or `MASTERDOWN` did nothing, so it is sent once more to the
/// master found then; a call cut off by a broken connection may or may not
/// have run, so it fails, and callers retry transient errors as they would on
/// one server.
#[derive(Clone)]
pub(crate) struct SentinelConnection {
    shared: Arc<SentinelShared>,
    settings: SharedSettings,
}

struct SentinelShared {
    /// Asks the Sentinels; one lookup at a time.
    sentinel: tokio::sync::Mutex<SentinelClient>,
    /// The connection to the current master, with its generation.
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    generations: AtomicU64,
    config: AsyncConnectionConfig,
}

impl SentinelConnection {
    /// Looks up the master now and connects to it.
    pub(crate) async fn connect(
        sentinel: SentinelClient,
        config: AsyncConnectionConfig,
        settings: SharedSettings,
    ) -> RedisResult<SentinelConnection> {
        let connection = SentinelConnection {
            shared: Arc::new(SentinelShared {
                sentinel: tokio::sync::Mutex::new(sentinel),
                current: Mutex::new(None),
                generations: AtomicU64::new(0),
                config,
            }),
            settings,
        };
        connection.current().await?;
        Ok(connection)
    }

    /// A client for the master Sentinel names now (for the subscription connection).
    pub(crate) async fn master_client(&self) -> RedisResult<redis::Client> {
        self.shared
            .sentinel
            .lock()
            .await
            .async_get_client()
            .await
            .map_err(unreachable)
    }

    async fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(current) = self.shared.current.lock().clone() {
            return Ok(current);
        }
        let mut sentinel = self.shared.sentinel.lock().await;
        // Another call may have connected while this one waited for the lookup.
        if let Some(current) = self.shared.current.lock().clone() {
            return Ok(current);
        }
        // No master known right now (a failover under way) is a passing state:
        // report it as a connection problem, which callers retry.
        let client = sentinel.async_get_client().await.map_err(unreachable)?;
        let conn = client
            .get_multiplexed_async_connection_with_config(&self.shared.config)
            .await?;
        let generation = self.shared.generations.fetch_add(1, Ordering::Relaxed) + 1;
        *self.shared.current.lock() = Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    /// Starts watching a call on `generation`: if the caller gives up on it
    /// after a whole response timeout without an answer, the master is
    /// presumed stopped or cut off (Sentinel may be promoting a replica), and
    /// the next call looks it up again.
    fn watch_for_silence(&self, generation: u64) -> Unanswered {
        Unanswered {
            connection: Some(self.clone()),
            generation,
            sent_at: std::time::Instant::now(),
        }
    }

    /// Drops the connection of `generation` unless a newer one replaced it already.
    fn forget(&self, generation: u64) {
        let mut current = self.shared.current.lock();
        if current
            .as_ref()
            .is_some_and(|(live, _)| *live == generation)
        {
            *current = None;
        }
    }

    fn settle<T>(&self, generation: u64, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result
            && master_may_have_moved(error)
        {
            self.forget(generation);
        }
        result
    }
}

/// A call in flight; see [`SentinelConnection::watch_for_silence`].
struct Unanswered {
    connection: Option<SentinelConnection>,
    generation: u64,
    sent_at: std::time::Instant,
}

impl Unanswered {
    fn answered(mut self) {
        self.connection = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            let limit = connection.settings.read().response_timeout;
            if self.sent_at.elapsed() >= limit {
                connection.forget(self.generation);
            }
        }
    }
}

/// True when the server refused a command because it is not (or no longer)
/// a usable master: a demoted master answers `READONLY` to the first write
/// and refuses before anything is written (a script fails at its first
/// write, and a replica takes no writes), so the call can be sent again.
/// redis-rs hands such refusals over as values, not errors.
fn refused_by_a_non_master(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(error) if matches!(error.code(), "READONLY" | "MASTERDOWN"))
}

/// A failed master lookup, as the I/O error it amounts to for callers.
fn unreachable(error: redis::RedisError) -> redis::RedisError {
    if error.is_io_error() {
        return error;
    }
    std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        format!("no master found through sentinel: {error}"),
    )
    .into()
}

/// Errors after which the master is looked up again.
fn master_may_have_moved(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
        || matches!(error.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.current().await?;
            let unanswered = self.watch_for_silence(generation);
            let result = conn.req_packed_command(cmd).await;
            unanswered.answered();
            if result.as_ref().is_ok_and(refused_by_a_non_master) {
                // Nothing ran on a replica: safe to send again to the new master.
                self.forget(generation);
                let (generation, mut conn) = self.current().await?;
                let result = conn.req_packed_command(cmd).await;
                return self.settle(generation, result);
            }
            self.settle(generation, result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.current().await?;
            let unanswered = self.watch_for_silence(generation);
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            unanswered.answered();
            if result
                .as_ref()
                .is_ok_and(|replies| replies.iter().any(refused_by_a_non_master))
            {
                self.forget(generation);
                let (generation, mut conn) = self.current().await?;
                let result = conn.req_packed_commands(pipeline, offset, count).await;
                return self.settle(generation, result);
            }
            self.settle(generation, result)
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

//! The client's command connection, lent to the application for its own
//! commands on the same deployment.

use std::future::Future;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::settings::SharedSettings;
use crate::transport::Connection;

/// A clone of a [`Client`](crate::Client)'s command connection, for the
/// application's own commands and scripts on the deployment its locks use:
/// it routes by slot on a Redis Cluster, follows a Sentinel failover to the
/// new master, and reconnects by itself, as the locks' calls do.
///
/// It implements [`redis::aio::ConnectionLike`], so redis-rs commands,
/// pipelines and scripts run on it. Clones share one multiplexed connection:
/// do not send blocking commands (`BLPOP`, `XREAD BLOCK`) through it, they
/// would hold up the locks' calls; use a client of their own for those.
///
/// Each call is bounded by the client's response timeout (read from the live
/// settings at each call, as the locks' calls are): a stalled server fails
/// the call with an I/O error of kind `TimedOut` instead of holding the
/// caller for as long as the stall lasts.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redlatch::Client::connect("redis://127.0.0.1:6379").await?;
/// let mut conn = client.redis_connection();
/// let stock: Option<i64> = redis::cmd("GET").arg("stock:42").query_async(&mut conn).await?;
/// # drop(stock); Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisConnection {
    conn: Connection,
    settings: SharedSettings,
}

impl RedisConnection {
    pub(crate) fn new(conn: Connection, settings: SharedSettings) -> RedisConnection {
        RedisConnection { conn, settings }
    }

    fn response_timeout(&self) -> Duration {
        self.settings.read().response_timeout
    }
}

/// `call`, or a `TimedOut` error once `limit` passes without its answer.
async fn bounded<T>(limit: Duration, call: RedisFuture<'_, T>) -> RedisResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer,
        Err(_) => Err(timed_out(limit)),
    }
}

fn timed_out(limit: Duration) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("redis did not answer within the response timeout ({limit:?})"),
    ))
}

fn boxed<'a, T: Send + 'a>(
    call: impl Future<Output = RedisResult<T>> + Send + 'a,
) -> RedisFuture<'a, T> {
    Box::pin(call)
}

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.conn.kind();
        f.debug_tuple("RedisConnection").field(&kind).finish()
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let limit = self.response_timeout();
        boxed(bounded(limit, self.conn.req_packed_command(cmd)))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let limit = self.response_timeout();
        boxed(bounded(
            limit,
            self.conn.req_packed_commands(pipeline, offset, count),
        ))
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

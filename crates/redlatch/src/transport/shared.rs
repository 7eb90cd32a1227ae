//! The client's command connection, lent to the application for its own
//! commands on the same deployment.

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, Value};

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
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redlatch::Client::connect("redis://127.0.0.1:6379").await?;
/// let mut conn = client.redis_connection();
/// let stock: Option<i64> = redis::cmd("GET").arg("stock:42").query_async(&mut conn).await?;
/// # drop(stock); Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisConnection(pub(crate) Connection);

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Connection::Single(_) => "single",
            Connection::Cluster(..) => "cluster",
            Connection::Sentinel(_) => "sentinel",
        };
        f.debug_tuple("RedisConnection").field(&kind).finish()
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

//! The connection that watches held keys: RESP3 with client-side caching
//! (`CLIENT TRACKING`), so the server pushes an invalidation the moment a
//! key this connection read is changed, deleted, expired or flushed.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionInfo, ProtocolVersion, PushInfo, RedisResult};
use tokio::sync::mpsc::UnboundedSender;

use crate::transport::sentinel::SentinelConnection;

/// Where watch connections come from.
#[derive(Clone)]
pub(crate) enum WatchSource {
    /// One server: a RESP3 client for it (certificates included).
    Single(Box<redis::Client>),
    /// The master Sentinel names now, looked up at each (re)connection.
    Sentinel(SentinelConnection),
    /// No watch here: the renewals alone find a lost hold (why, for the log).
    Unsupported(&'static str),
}

impl WatchSource {
    /// `info` with RESP3, which carries the server's pushes.
    pub(crate) fn resp3(info: ConnectionInfo) -> ConnectionInfo {
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        info.set_redis_settings(settings)
    }

    /// Opens a watch connection whose pushes (invalidations, and the
    /// library's own disconnection notice) go to `pushes`.
    pub(crate) async fn open(
        &self,
        pushes: UnboundedSender<PushInfo>,
        timeout: Duration,
    ) -> RedisResult<MultiplexedConnection> {
        let client = match self {
            WatchSource::Single(client) => (**client).clone(),
            // Custom certificates are refused under Sentinel: the URL's
            // scheme is all there is to carry over.
            WatchSource::Sentinel(sentinel) => {
                let master = sentinel.master_client().await?;
                redis::Client::open(Self::resp3(master.get_connection_info().clone()))?
            }
            WatchSource::Unsupported(why) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "no watch connection",
                    (*why).to_owned(),
                )));
            }
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_push_sender(pushes);
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

/// Whether a `ROLE` reply says master: a watch connection through Sentinel
/// asks before it takes its server's answers.
pub(crate) fn is_master(role: &redis::Value) -> bool {
    use redis::Value;
    match role {
        Value::Array(fields) => {
            matches!(
                fields.first(),
                Some(Value::BulkString(kind)) if kind.as_slice() == b"master"
            ) || matches!(fields.first(), Some(Value::SimpleString(kind)) if kind == "master")
        }
        _ => false,
    }
}

//! The connection that watches held keys: RESP3 with client-side caching
//! (`CLIENT TRACKING`), so the server pushes an invalidation the moment a
//! key this connection read is changed, deleted, expired or flushed.

use std::time::Duration;

use redis::aio::{AsyncPushSender, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, ProtocolVersion, PushInfo, RedisResult,
};
use tokio::sync::mpsc::UnboundedSender;

use crate::transport::sentinel::SentinelConnection;
use crate::transport::tls::Certificates;

/// Where watch connections come from.
#[derive(Clone)]
pub(crate) enum WatchSource {
    /// One server: a RESP3 client for it (certificates included).
    Single(Box<redis::Client>),
    /// The master Sentinel names now, looked up at each (re)connection.
    Sentinel(SentinelConnection),
    /// The masters of a Redis Cluster, a connection each, opened as the
    /// watch learns (from `MOVED`) which node serves a held key's slot.
    Cluster(ClusterNodes),
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
            WatchSource::Cluster(_) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "no single watch connection",
                    "a cluster's watch opens a connection per node".to_owned(),
                )));
            }
        };
        connect(&client, pushes, timeout).await
    }
}

async fn connect(
    client: &redis::Client,
    pushes: impl AsyncPushSender,
    timeout: Duration,
) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_push_sender(pushes);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// The nodes a cluster's watch starts from, and how it reaches any other
/// node: the first seed's credentials, database and TLS settings, at the
/// address a `MOVED` reply names.
#[derive(Clone)]
pub(crate) struct ClusterNodes {
    seeds: Vec<ConnectionInfo>,
    certs: Certificates,
}

impl ClusterNodes {
    /// From the cluster's node URLs (at least one).
    pub(crate) fn new(seeds: Vec<ConnectionInfo>, certs: Certificates) -> ClusterNodes {
        ClusterNodes { seeds, certs }
    }

    /// The seeds' addresses (`host:port`), where the watch asks first.
    pub(crate) fn seed_addresses(&self) -> Vec<String> {
        self.seeds
            .iter()
            .filter_map(|seed| match seed.addr() {
                ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                    Some(format!("{host}:{port}"))
                }
                _ => None,
            })
            .collect()
    }

    /// Opens a RESP3 connection to the node at `address` (`host:port`, as
    /// a `MOVED` reply names it), its pushes sent to `pushes`.
    pub(crate) async fn open(
        &self,
        address: &str,
        pushes: impl AsyncPushSender,
        timeout: Duration,
    ) -> RedisResult<MultiplexedConnection> {
        let invalid = |what: &str| {
            redis::RedisError::from((
                redis::ErrorKind::Client,
                "cluster node address",
                format!("{what}: {address:?}"),
            ))
        };
        let (host, port) = address.rsplit_once(':').ok_or_else(|| invalid("no port"))?;
        let port: u16 = port.parse().map_err(|_| invalid("bad port"))?;
        let seed = self.seeds.first().ok_or_else(|| invalid("no seed node"))?;
        let addr = match seed.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_owned(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_owned(), port),
        };
        let info = WatchSource::resp3(seed.clone().set_addr(addr));
        let client = self
            .certs
            .client(info)
            .map_err(|error| invalid(&error.to_string()))?;
        connect(&client, pushes, timeout).await
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

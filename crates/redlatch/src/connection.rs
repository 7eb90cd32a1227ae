//! The command connection: one server, a Redis Cluster, or the master that
//! Sentinel points at.
//!
//! Every lock operation goes through [`Connection`], which implements
//! [`redis::aio::ConnectionLike`] so scripts and commands run on it as on a
//! plain connection. Clones share the underlying connection(s).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::io::tcp::socket2::TcpKeepalive;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisConnectionInfo,
    RedisFuture, RedisResult, Value,
};

use crate::config::{MasterAuth, ReplicaWait, Topology};
use crate::error::{Error, Result};
use crate::settings::{Settings, SharedSettings};
use crate::subscription::SubscriptionSource;

/// Opens the command connection for `topology` (now, bounded by the connect
/// timeout and retries), and says where subscription connections come from.
pub(crate) async fn open(
    url: &str,
    topology: &Topology,
    shared: &SharedSettings,
    replica_wait: Option<ReplicaWait>,
) -> Result<(Connection, SubscriptionSource)> {
    let settings: Arc<Settings> = shared.read().clone();
    let settings = settings.as_ref();
    let connect_limit = settings
        .connect_timeout
        .saturating_mul(settings.retry.attempts + 1)
        .saturating_add(
            settings
                .retry
                .max_delay
                .saturating_mul(settings.retry.attempts),
        );
    let opened = async {
        match topology {
            Topology::Single => open_single(url, settings).await,
            Topology::Cluster(nodes) => {
                let waits = replica_wait.map_or(Duration::ZERO, |wait| wait.timeout);
                open_cluster(nodes, settings, waits).await
            }
            Topology::Sentinel {
                sentinels,
                master,
                auth,
            } => open_sentinel(sentinels, master, auth.as_ref(), shared).await,
        }
    };
    tokio::time::timeout(connect_limit, opened)
        .await
        .map_err(|_| Error::ResponseTimeout { op: "connect" })?
}

fn tcp_settings() -> TcpSettings {
    // Dead peers must be noticed even when no answer is awaited.
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(15))
        .with_interval(Duration::from_secs(5));
    // Lock traffic is many tiny requests: never let Nagle hold them back.
    TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
}

fn connection_info(url: &str) -> Result<ConnectionInfo> {
    Ok(url
        .into_connection_info()
        .map_err(|error| Error::InvalidConfig(format!("redis URL {url:?}: {error}")))?
        .set_tcp_settings(tcp_settings()))
}

async fn open_single(url: &str, settings: &Settings) -> Result<(Connection, SubscriptionSource)> {
    let redis_client = redis::Client::open(connection_info(url)?)
        .map_err(|error| Error::InvalidConfig(format!("redis URL: {error}")))?;
    // Response timeouts are applied per call from the live settings, so
    // the connection itself has none.
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(None)
        .set_number_of_retries(settings.retry.attempts as usize)
        .set_min_delay(settings.retry.base_delay)
        .set_max_delay(settings.retry.max_delay);
    let conn = ConnectionManager::new_with_config(redis_client.clone(), manager_config)
        .await
        .map_err(|error| Error::from_redis("connect", error))?;
    Ok((
        Connection::Single(conn),
        SubscriptionSource::Single(redis_client),
    ))
}

async fn open_cluster(
    urls: &[String],
    settings: &Settings,
    replica_wait: Duration,
) -> Result<(Connection, SubscriptionSource)> {
    let nodes = urls
        .iter()
        .map(|url| connection_info(url))
        .collect::<Result<Vec<_>>>()?;
    let client = ClusterClientBuilder::new(nodes.clone())
        .connection_timeout(settings.connect_timeout)
        // The cluster client needs a response timeout to give up on a dead
        // node and refresh the topology (calls are bounded again per call);
        // an acquire's pipelined WAIT may take its own timeout on top.
        .response_timeout(settings.response_timeout.saturating_add(replica_wait))
        .retries(settings.retry.attempts)
        .min_retry_wait(settings.retry.base_delay.as_millis() as u64)
        .max_retry_wait(settings.retry.max_delay.as_millis() as u64)
        .tcp_settings(tcp_settings())
        .build()
        .map_err(|error| Error::InvalidConfig(format!("cluster nodes: {error}")))?;
    let conn = client
        .get_async_connection()
        .await
        .map_err(|error| Error::from_redis("connect", error))?;
    Ok((
        Connection::Cluster(conn),
        SubscriptionSource::Cluster {
            nodes,
            connect_timeout: settings.connect_timeout,
        },
    ))
}

async fn open_sentinel(
    urls: &[String],
    master: &str,
    auth: Option<&MasterAuth>,
    shared: &SharedSettings,
) -> Result<(Connection, SubscriptionSource)> {
    let settings = shared.read().clone();
    let sentinels = urls
        .iter()
        .map(|url| connection_info(url))
        .collect::<Result<Vec<_>>>()?;
    let mut credentials = RedisConnectionInfo::default();
    if let Some(auth) = auth {
        if let Some(username) = &auth.username {
            credentials = credentials.set_username(username);
        }
        credentials = credentials.set_password(&auth.password);
    }
    let node = SentinelNodeConnectionInfo::default()
        .set_tcp_settings(tcp_settings())
        .set_redis_connection_info(credentials);
    let client = SentinelClient::build(
        sentinels,
        String::from(master),
        Some(node),
        SentinelServerType::Master,
    )
    .map_err(|error| Error::InvalidConfig(format!("sentinel: {error}")))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(None);
    let conn = SentinelConnection::connect(client, config, shared.clone())
        .await
        .map_err(|error| Error::from_redis("connect", error))?;
    Ok((
        Connection::Sentinel(conn.clone()),
        SubscriptionSource::Sentinel(conn),
    ))
}

/// Where the client's commands go.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (or a fixed address), reconnected by redis-rs.
    Single(ConnectionManager),
    /// A Redis Cluster: commands are routed by key slot; MOVED, ASK and
    /// topology changes after a failover are followed by redis-rs.
    Cluster(ClusterConnection),
    /// The master of a Sentinel-monitored group, looked up again after errors.
    Sentinel(SentinelConnection),
}

impl Connection {
    /// True on a Redis Cluster: keys of one call must share a slot, and
    /// wake-ups use sharded pub/sub.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    /// The command scripts publish unlock messages with: `spublish` (sharded,
    /// delivered only by the shard that owns the channel's slot) on a
    /// cluster, `publish` elsewhere, as Redisson's own clients expect.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "spublish"
        } else {
            "publish"
        }
    }

    /// The `PUBSUB` subcommand that counts subscribers of a lock channel.
    pub(crate) fn numsub_command(&self) -> &'static str {
        if self.is_cluster() {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        }
    }
}

/// One server to send a key-less command to: the only one, or a cluster node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// The server (or master) this connection talks to.
    Default,
    /// A cluster node by address.
    At { host: String, port: u16 },
}

impl Connection {
    /// The servers a walk over the whole keyspace must visit: the server
    /// itself, or every master of a cluster (asked with `CLUSTER NODES`).
    pub(crate) async fn keyspace_nodes(&mut self) -> RedisResult<Vec<Node>> {
        let Connection::Cluster(cluster) = self else {
            return Ok(vec![Node::Default]);
        };
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(cluster)
            .await?;
        Ok(cluster_masters(&nodes))
    }

    /// Runs `command` on `node`.
    pub(crate) async fn query_on<T: redis::FromRedisValue>(
        &mut self,
        node: &Node,
        command: &Cmd,
    ) -> RedisResult<T> {
        match (self, node) {
            (Connection::Cluster(cluster), Node::At { host, port }) => {
                let routing = redis::cluster_routing::RoutingInfo::SingleNode(
                    redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
                        host: host.clone(),
                        port: *port,
                    },
                );
                let value = cluster.route_command(command.clone(), routing).await?;
                Ok(redis::from_redis_value(value)?)
            }
            (conn, _) => command.query_async(conn).await,
        }
    }
}

/// Addresses of the masters that serve slots, from a `CLUSTER NODES` reply
/// (`ID HOST:PORT@BUS[,NAME] FLAGS MASTER PING PONG EPOCH LINK SLOT...`).
fn cluster_masters(nodes: &str) -> Vec<Node> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            let serves_slots = fields.len() > 8;
            let failed = flags.contains("fail") && !flags.contains("fail?");
            if !flags.split(',').any(|flag| flag == "master") || failed || !serves_slots {
                return None;
            }
            let address = fields.get(1)?.split(['@', ',']).next()?;
            let (host, port) = address.rsplit_once(':')?;
            Some(Node::At {
                host: host.to_owned(),
                port: port.parse().ok()?,
            })
        })
        .collect()
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
            Connection::Sentinel(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
            Connection::Sentinel(conn) => conn.get_db(),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_serving_slots_are_found_in_cluster_nodes() {
        let reply = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected
d4 127.0.0.1:7002@17002 master,fail - 0 0 3 connected
e5 127.0.0.1:7004@17004,node-e master - 0 0 5 connected 10923-16383
f6 127.0.0.1:7005@17005 master - 0 0 6 connected
";
        let at = |port| Node::At {
            host: "127.0.0.1".to_owned(),
            port,
        };
        assert_eq!(cluster_masters(reply), vec![at(7000), at(7001), at(7004)]);
    }
}

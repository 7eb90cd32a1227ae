//! The command connection: one server, a Redis Cluster, or the master that
//! Sentinel points at.
//!
//! Every lock operation goes through [`Connection`], which implements
//! [`redis::aio::ConnectionLike`] so scripts and commands run on it as on a
//! plain connection. Clones share the underlying connection(s).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::io::tcp::socket2::TcpKeepalive;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisConnectionInfo,
    RedisFuture, RedisResult, Value,
};

use crate::error::{Error, Result};
use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::deployment::Servers;
use crate::settings::{Settings, SharedSettings};
use crate::transport::idle::{self, IdleCheck};
use crate::transport::no_evict::Keeper;
use crate::transport::script_routes::ScriptRoutes;
use crate::transport::sentinel::SentinelConnection;
use crate::transport::subscription::SubscriptionSource;
use crate::transport::tls::Certificates;
use crate::transport::topology::{MasterAuth, ReplicaWait, Topology};
use crate::transport::watch::{ClusterNodes, WatchSource};

/// Opens the command connection for `topology` (now), and says where
/// subscription connections come from.
///
/// One server gets the connect timeout in all, retries included: a server
/// that accepts connections and never answers fails after it, with
/// [`Error::ConnectTimeout`]. A cluster or a Sentinel group, which may have
/// to try several nodes, gets the connect timeout for each attempt and its
/// retries.
pub(crate) async fn open(
    url: &str,
    topology: &Topology,
    shared: &SharedSettings,
    replica_wait: Option<ReplicaWait>,
) -> Result<(Connection, SubscriptionSource, WatchSource)> {
    let settings: Arc<Settings> = shared.read().clone();
    let settings = settings.as_ref();
    let connect_limit = match topology.servers {
        Servers::Single(_) | Servers::Redlock(_) => settings.connect_timeout,
        Servers::Cluster(_) | Servers::Sentinel { .. } => settings
            .connect_timeout
            .saturating_mul(settings.retry.attempts + 1)
            .saturating_add(
                settings
                    .retry
                    .max_delay
                    .saturating_mul(settings.retry.attempts),
            ),
    };
    let urls: Vec<&str> = match &topology.servers {
        Servers::Single(_) | Servers::Redlock(_) => vec![url],
        Servers::Cluster(nodes) => nodes.iter().map(String::as_str).collect(),
        Servers::Sentinel { sentinels, .. } => sentinels.iter().map(String::as_str).collect(),
    };
    let certs = Certificates::load(topology.tls.as_ref(), &urls)?;
    let opened = async {
        match &topology.servers {
            Servers::Single(_) => open_single(url, settings, &certs).await,
            Servers::Redlock(_) => Err(crate::transport::topology::redlock_refused()),
            Servers::Cluster(nodes) => {
                let waits = replica_wait.map_or(Duration::ZERO, |wait| wait.timeout);
                open_cluster(nodes, shared, waits, certs, topology.cluster_pubsub).await
            }
            Servers::Sentinel { sentinels, master } => {
                certs.refuse_custom("Sentinel")?;
                open_sentinel(sentinels, master, topology.master_auth.as_ref(), shared).await
            }
        }
    };
    let tls = urls.iter().any(|url| url.starts_with("rediss://"));
    match tokio::time::timeout(connect_limit, opened).await {
        Ok(Ok(opened)) => Ok(opened),
        Ok(Err(error)) => Err(connect_error(error, url)),
        Err(_) => Err(Error::ConnectTimeout {
            limit: connect_limit,
            tls,
        }),
    }
}

/// Names the causes of a failed connect a caller can fix: a database the
/// server does not have, a certificate refused during the TLS handshake.
fn connect_error(error: Error, url: &str) -> Error {
    let source = match &error {
        Error::Unavailable { source, .. } | Error::Redis { source, .. } => source,
        _ => return error,
    };
    let text = source.to_string();
    if text.contains("DB index is out of range") {
        let db = url
            .into_connection_info()
            .map(|info| info.redis_settings().db())
            .unwrap_or_default();
        return Error::InvalidConfig(format!(
            "redis URL {}: the server has no database {db} (DB index is out of range); \
             pick a database below its `databases` setting (16 by default)",
            crate::settings::deployment::redact_url(url)
        ));
    }
    crate::transport::tls::certificate_error(&text).unwrap_or(error)
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

async fn open_single(
    url: &str,
    settings: &Settings,
    certs: &Certificates,
) -> Result<(Connection, SubscriptionSource, WatchSource)> {
    let redis_client = certs.client(connection_info(url)?)?;
    let watch_client = certs.client(WatchSource::resp3(connection_info(url)?))?;
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
        Connection::new(Link::Single(conn)),
        SubscriptionSource::Single(redis_client),
        WatchSource::Single(Box::new(watch_client)),
    ))
}

async fn open_cluster(
    urls: &[String],
    shared: &SharedSettings,
    replica_wait: Duration,
    certs: Certificates,
    pubsub: ClusterPubSub,
) -> Result<(Connection, SubscriptionSource, WatchSource)> {
    let settings: Arc<Settings> = shared.read().clone();
    let nodes = urls
        .iter()
        .map(|url| connection_info(url))
        .collect::<Result<Vec<_>>>()?;
    let client = certs
        .cluster(ClusterClientBuilder::new(nodes.clone()))
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
    let watch = WatchSource::Cluster(ClusterNodes::new(nodes.clone(), certs.clone()));
    Ok((
        Connection::new(Link::Cluster(conn, shared.clone(), pubsub)),
        SubscriptionSource::Cluster {
            nodes,
            connect_timeout: settings.connect_timeout,
            certs,
            pubsub,
        },
        watch,
    ))
}

async fn open_sentinel(
    urls: &[String],
    master: &str,
    auth: Option<&MasterAuth>,
    shared: &SharedSettings,
) -> Result<(Connection, SubscriptionSource, WatchSource)> {
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
        Connection::new(Link::Sentinel(conn.clone())),
        SubscriptionSource::Sentinel(conn.clone()),
        WatchSource::Sentinel(conn),
    ))
}

/// Where the client's commands go, and how scripts reach that server.
/// Clones share both.
#[derive(Clone)]
pub(crate) struct Connection {
    link: Link,
    routes: Arc<ScriptRoutes>,
    /// Keeps the server from evicting it, across reconnections.
    no_evict: Arc<Keeper>,
    /// Sends a PING before a call on a connection the server may have
    /// closed as idle.
    idle: Arc<IdleCheck>,
}

impl Connection {
    fn new(link: Link) -> Connection {
        Connection {
            link,
            routes: Arc::new(ScriptRoutes::default()),
            no_evict: Arc::new(Keeper::default()),
            idle: Arc::new(IdleCheck::default()),
        }
    }

    /// Takes the server's idle `timeout` (`None`: it would not say).
    pub(crate) fn server_idle_timeout(&self, timeout: Option<Duration>) {
        self.idle.server_timeout(timeout);
    }

    /// Keeps the connection unevictable (the server granted `CLIENT
    /// NO-EVICT ON` at connect), also after it reconnects.
    pub(crate) fn keep_unevictable(&self) {
        self.no_evict.keep();
    }

    /// How scripts reach the server (shared by the connection's clones).
    pub(crate) fn script_routes(&self) -> &ScriptRoutes {
        &self.routes
    }

    /// The kind of connection, for debug output.
    pub(crate) fn kind(&self) -> &'static str {
        match &self.link {
            Link::Single(_) => "single",
            Link::Cluster(..) => "cluster",
            Link::Sentinel(_) => "sentinel",
        }
    }
}

/// The connection underneath a [`Connection`].
#[derive(Clone)]
enum Link {
    /// One server (or a fixed address), reconnected by redis-rs.
    Single(ConnectionManager),
    /// A Redis Cluster: commands are routed by key slot; MOVED, ASK and
    /// topology changes after a failover are followed by redis-rs, which
    /// also sends a command again when its connection drops while the
    /// command is in flight (so scripts that change data run re-send-safe
    /// there, see [`crate::scripts::Mutating`]). The settings give the
    /// policy for re-sending a request whose outcome is unknown, and how
    /// wake-ups travel.
    Cluster(ClusterConnection, SharedSettings, ClusterPubSub),
    /// The master of a Sentinel-monitored group, looked up again after errors.
    Sentinel(SentinelConnection),
}

impl Connection {
    /// True on a Redis Cluster: keys of one call must share a slot.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(..))
    }

    /// How requests whose outcome is unknown are sent again: on a cluster
    /// only, where every script that changes data runs re-send-safe (the
    /// single-server and Sentinel connections never re-send by themselves,
    /// so they run the plain scripts and skip the request records).
    pub(crate) fn resend_policy(&self) -> Option<Arc<Settings>> {
        match &self.link {
            Link::Cluster(_, shared, _) => Some(shared.read().clone()),
            Link::Single(_) | Link::Sentinel(_) => None,
        }
    }

    /// True when wake-ups use sharded pub/sub: on a cluster, unless set to plain.
    fn sharded_pubsub(&self) -> bool {
        matches!(self.link, Link::Cluster(_, _, ClusterPubSub::Sharded))
    }

    /// The command scripts publish unlock messages with: `spublish` (sharded,
    /// delivered only by the shard that owns the channel's slot) on a
    /// cluster, `publish` elsewhere or when set to plain, as the Redisson
    /// clients on the same locks must be configured.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.sharded_pubsub() {
            "spublish"
        } else {
            "publish"
        }
    }

    /// The `PUBSUB` subcommand that counts subscribers of a lock channel.
    pub(crate) fn numsub_command(&self) -> &'static str {
        if self.sharded_pubsub() {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        }
    }
}

impl Connection {
    /// Where the connection is kept unevictable: sets the flag again if a
    /// call failed on the connection since, and gives what notes this
    /// call's outcome. `None` (nothing to do per call) elsewhere.
    fn watched_for_reconnection(&self) -> Option<Arc<Keeper>> {
        if !self.no_evict.wanted() {
            return None;
        }
        self.no_evict.renew_if_unsure(self);
        Some(self.no_evict.clone())
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
    /// itself, or every master of a cluster, named as the cluster client
    /// names its connections (asked with `CLUSTER SLOTS`, whose endpoints
    /// it reads too: an IP address, or a hostname where the cluster
    /// announces those; `CLUSTER NODES` gives the IP address alone, which
    /// the client then has no connection for).
    pub(crate) async fn keyspace_nodes(&mut self) -> RedisResult<Vec<Node>> {
        let Link::Cluster(cluster, ..) = &mut self.link else {
            return Ok(vec![Node::Default]);
        };
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(cluster)
            .await?;
        Ok(slot_masters(&slots))
    }

    /// Runs `command` on `node`.
    pub(crate) async fn query_on<T: redis::FromRedisValue>(
        &mut self,
        node: &Node,
        command: &Cmd,
    ) -> RedisResult<T> {
        if let (Link::Cluster(cluster, ..), Node::At { host, port }) = (&mut self.link, node) {
            let routing = redis::cluster_routing::RoutingInfo::SingleNode(
                redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                },
            );
            let value = cluster.route_command(command.clone(), routing).await?;
            return Ok(redis::from_redis_value(value)?);
        }
        command.query_async(self).await
    }
}

/// The masters that serve slots, from a `CLUSTER SLOTS` reply (`[[START,
/// END, [HOST, PORT, ID, ...], REPLICA...], ...]`), each once. A range
/// whose master's endpoint is unknown (`?` or empty) is left out.
fn slot_masters(slots: &Value) -> Vec<Node> {
    let Value::Array(ranges) = slots else {
        return Vec::new();
    };
    let mut masters = Vec::new();
    for range in ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        let Some(Value::Array(master)) = fields.get(2) else {
            continue;
        };
        let host = match master.first() {
            Some(Value::BulkString(bytes)) => String::from_utf8(bytes.clone()).ok(),
            Some(Value::SimpleString(text)) => Some(text.clone()),
            _ => None,
        };
        let port = match master.get(1) {
            Some(Value::Int(port)) => u16::try_from(*port).ok(),
            _ => None,
        };
        let (Some(host), Some(port)) = (host, port) else {
            continue;
        };
        if host.is_empty() || host == "?" {
            continue;
        }
        let node = Node::At { host, port };
        if !masters.contains(&node) {
            masters.push(node);
        }
    }
    masters
}

impl Connection {
    /// Sends one call through `send`: after a PING where the connection
    /// idled long enough that the server may have closed it (not on a
    /// cluster, whose client sends a call cut off by a dropped connection
    /// again by itself), and noting its outcome where the connection is
    /// kept unevictable.
    fn call<'a, T: Send + 'a>(
        &'a mut self,
        send: impl FnOnce(&'a mut Link) -> RedisFuture<'a, T> + Send + 'a,
    ) -> RedisFuture<'a, T> {
        let keeper = self.watched_for_reconnection();
        let ping_first = !self.is_cluster() && self.idle.used_now();
        if !ping_first && keeper.is_none() {
            return send(&mut self.link);
        }
        let idle_check = ping_first.then(|| self.idle.clone());
        let link = &mut self.link;
        Box::pin(async move {
            if let Some(idle_check) = idle_check {
                idle::ping(&mut *link).await;
                idle_check.answered();
            }
            let outcome = send(link).await;
            if let Some(keeper) = keeper {
                keeper.note(&outcome);
            }
            outcome
        })
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.call(move |link| link.req_packed_command(cmd))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.call(move |link| link.req_packed_commands(pipeline, offset, count))
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Single(conn) => conn.req_packed_command(cmd),
            Link::Cluster(conn, ..) => conn.req_packed_command(cmd),
            Link::Sentinel(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Link::Cluster(conn, ..) => conn.req_packed_commands(pipeline, offset, count),
            Link::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Single(conn) => conn.get_db(),
            Link::Cluster(conn, ..) => conn.get_db(),
            Link::Sentinel(conn) => conn.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_serving_slots_are_found_in_cluster_slots_once_each() {
        let text = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let node =
            |host: &str, port: i64| Value::Array(vec![text(host), Value::Int(port), text("id")]);
        let range = |start: i64, end: i64, master: Value, replicas: Vec<Value>| {
            let mut fields = vec![Value::Int(start), Value::Int(end), master];
            fields.extend(replicas);
            Value::Array(fields)
        };
        let reply = Value::Array(vec![
            range(
                0,
                5460,
                node("127.0.0.1", 7000),
                vec![node("127.0.0.1", 7003)],
            ),
            range(5461, 10000, node("node-b", 7001), vec![]),
            range(10001, 10922, node("node-b", 7001), vec![]),
            range(10923, 16000, node("?", 7002), vec![]),
            range(16001, 16383, node("127.0.0.1", 7004), vec![]),
            Value::Int(3),
        ]);
        let at = |host: &str, port| Node::At {
            host: host.to_owned(),
            port,
        };
        assert_eq!(
            slot_masters(&reply),
            vec![
                at("127.0.0.1", 7000),
                at("node-b", 7001),
                at("127.0.0.1", 7004)
            ]
        );
        assert_eq!(slot_masters(&Value::Nil), vec![]);
    }
}

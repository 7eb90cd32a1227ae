//! Where a client finds Redis, and what it asks of replicas.

use std::time::Duration;

use crate::transport::tls::TlsFiles;

/// Where a client finds Redis, and how it secures the connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) servers: Servers,
    /// Certificates for `rediss://` URLs; `None` uses the system's trust store.
    pub(crate) tls: Option<TlsFiles>,
    /// How wake-ups travel on a Redis Cluster.
    pub(crate) cluster_pubsub: ClusterPubSub,
}

/// How lock wake-ups travel on a Redis Cluster
/// ([`ClientBuilder::cluster_pubsub`](crate::ClientBuilder::cluster_pubsub)).
///
/// Redisson's clients on the same locks must do the same: Redisson uses
/// sharded pub/sub on Redis 7.0 and later by default
/// (`shardedSubscriptionMode = AUTO`), plain pub/sub when configured with
/// `shardedSubscriptionMode = OFF` or on older servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterPubSub {
    /// `SPUBLISH` / `SSUBSCRIBE` (Redis 7.0+): a message goes only to the
    /// shard that owns the channel's slot. The default.
    #[default]
    Sharded,
    /// `PUBLISH` / `SUBSCRIBE`: every message is broadcast to every node of
    /// the cluster, for Redisson clients without sharded subscriptions.
    Plain,
}

/// The servers a client talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Servers {
    /// One server at a URL.
    Single,
    /// A Redis Cluster, discovered from any of these node URLs.
    Cluster(Vec<String>),
    /// The master Sentinel knows as `master`, asked from these Sentinel URLs.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        auth: Option<MasterAuth>,
    },
}

/// Credentials for the master and replicas found through Sentinel.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct MasterAuth {
    pub(crate) username: Option<String>,
    pub(crate) password: String,
}

impl std::fmt::Debug for MasterAuth {
    // Never print the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterAuth")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// "Wait for N replicas" after each acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaWait {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
    /// Waited for by `WAITAOF 1 replicas timeout` (the master's and the
    /// replicas' append-only files fsynced) rather than `WAIT` (received).
    pub(crate) fsync: bool,
}

//! How lock wake-ups travel on a Redis Cluster: a setting, plain data.

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

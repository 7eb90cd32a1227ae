//! Redlock: one lock over N independent Redis masters, held while a majority agrees.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use uuid::Uuid;

use crate::client::Client;
use crate::client::builder::ClientBuilder;
use crate::error::{Error, Result};
use crate::redlock::node::Node;
use crate::redlock::quorum;
use crate::settings::Settings;
use crate::sync::Spawner;

/// Longest per-node timeout chosen by default: a node that has not answered
/// by then is counted as failed for this call. One second leaves room for
/// slow links (a 100 ms round trip, a TCP retransmission) while a frozen
/// or cut-off master still costs each call at most that.
pub(crate) const DEFAULT_NODE_TIMEOUT_CAP: Duration = Duration::from_secs(1);

/// Default upper bound of the random delay before retrying after a split
/// vote (several clients each took some nodes, none a majority).
pub(crate) const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(20);

/// A lock service over N independent Redis masters (no replication between
/// them), following the algorithm of Redis's distributed-lock page: a lock
/// is held when a majority of the masters granted it, within a validity
/// that leaves room for the time the fan-out took and for clock drift.
///
/// Each master gets the same reentrant hash lock as a single-server
/// [`Lock`](crate::Lock), in Redisson's layout: a Redisson `RedissonRedLock`
/// over the same masters and a redlatch [`Redlock`] exclude each other.
///
/// Cheap to clone (an `Arc`). Every call goes to all masters at once, each
/// bounded by the per-node timeout ([`Redlock::with_node_timeout`]): a dead
/// or frozen master costs at most that timeout, never a lease.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let masters = testkit::Servers::start(3).unwrap();
/// # let urls = masters.urls();
/// let redlock = redlatch::Redlock::connect(&urls).await?; // e.g. 5 masters
/// let guard = redlock.lock("invoice:2024-11").acquire().await?;
/// println!("fencing token {}", guard.token());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Redlock {
    pub(crate) inner: Arc<RedlockInner>,
    pub(crate) options: Options,
}

/// Tunables copied into each lock handle made afterwards.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// `None`: a third of the lease, at most [`DEFAULT_NODE_TIMEOUT_CAP`].
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) retry_jitter: Duration,
}

pub(crate) struct RedlockInner {
    /// Written before every owner on every node: `<id>:#<n>`.
    pub(crate) id: Uuid,
    pub(crate) nodes: Vec<Node>,
    owner_seq: AtomicU64,
    /// Calls still running on the slower nodes after a decision at the
    /// first majority (see [`RedlockGuard::release_everywhere`]).
    ///
    /// [`RedlockGuard::release_everywhere`]: crate::RedlockGuard::release_everywhere
    pub(crate) stragglers: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Redlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<&str> = self
            .inner
            .nodes
            .iter()
            .map(|node| node.label.as_str())
            .collect();
        f.debug_struct("Redlock")
            .field("id", &self.inner.id)
            .field("nodes", &nodes)
            .field("options", &self.options)
            .finish()
    }
}

impl Redlock {
    /// Longest per-node timeout chosen by default: a node that has not answered
    /// by then is counted as failed for this call. One second leaves room for
    /// slow links (a 100 ms round trip, a TCP retransmission) while a frozen
    /// or cut-off master still costs each call at most that.
    pub const DEFAULT_NODE_TIMEOUT_CAP: Duration = DEFAULT_NODE_TIMEOUT_CAP;
    /// Default upper bound of the random delay before retrying after a split
    /// vote (several clients each took some nodes, none a majority).
    pub const DEFAULT_RETRY_JITTER: Duration = DEFAULT_RETRY_JITTER;

    /// A Redlock over already connected clients, one per master, named
    /// `node 0`, `node 1`... in errors. Each client's settings (key prefix,
    /// default lease, response timeout) apply to its node; the default lease
    /// of the first one is the Redlock's.
    ///
    /// Use an odd number of masters (typically 5): a majority of an even
    /// number tolerates no more failures than the odd number below it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `clients` is empty.
    pub fn new(clients: Vec<Client>) -> Result<Redlock> {
        let nodes = clients
            .into_iter()
            .enumerate()
            .map(|(i, client)| Node {
                label: format!("node {i}"),
                client: Some(client),
                connect_error: None,
            })
            .collect();
        Redlock::from_nodes(nodes)
    }

    /// As [`Redlock::new`], with a label of your own for each node (shown in
    /// [`Error::QuorumFailed`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `clients` is empty.
    pub fn with_labels(clients: Vec<(String, Client)>) -> Result<Redlock> {
        let nodes = clients
            .into_iter()
            .map(|(label, client)| Node {
                label,
                client: Some(client),
                connect_error: None,
            })
            .collect();
        Redlock::from_nodes(nodes)
    }

    /// Connects to every master at once, with default [`Settings`].
    ///
    /// # Errors
    /// As [`Redlock::connect_with`].
    pub async fn connect(urls: &[impl AsRef<str>]) -> Result<Redlock> {
        Redlock::connect_with(urls.iter().map(|url| Client::builder(url.as_ref()))).await
    }

    /// Connects to every master at once, each with its [`ClientBuilder`]
    /// (settings, TLS, [`lean`](crate::ClientBuilder::lean)...): the shape
    /// of [`Client::builder`]`(url).….connect()`, once per master. A
    /// master may be a Sentinel-watched group
    /// ([`ClientBuilder::sentinel`]); it is labelled by its URLs.
    ///
    /// Masters that cannot be reached now are kept as failed nodes (every
    /// call counts them as failed, naming the connect error); the Redlock
    /// works while a majority of all masters answers.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let masters = testkit::Servers::start(3).unwrap();
    /// # let urls = masters.urls();
    /// use std::time::Duration;
    ///
    /// let redlock = redlatch::Redlock::connect_with(urls.iter().map(|url| {
    ///     redlatch::Client::builder(url)
    ///         .default_lease(Duration::from_secs(10))
    ///         .connect_timeout(Duration::from_secs(1))
    /// }))
    /// .await?;
    /// assert_eq!(redlock.node_count(), 3);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for no master or a bad URL,
    /// [`Error::InvalidDuration`] for bad settings,
    /// [`Error::QuorumFailed`] when fewer than a majority connect.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the connection attempts.
    pub async fn connect_with(
        builders: impl IntoIterator<Item = ClientBuilder>,
    ) -> Result<Redlock> {
        let connecting: Vec<_> = builders
            .into_iter()
            .map(|builder| async move {
                let label = builder.topology.servers.label();
                (label, builder.connect().await)
            })
            .collect();
        if connecting.is_empty() {
            return Err(Error::InvalidConfig(
                "a Redlock needs at least one Redis URL".to_owned(),
            ));
        }
        let results = futures_util::future::join_all(connecting).await;
        let mut nodes = Vec::with_capacity(results.len());
        let mut failures = Vec::new();
        for (label, connected) in results {
            match connected {
                Ok(client) => nodes.push(Node {
                    label,
                    client: Some(client),
                    connect_error: None,
                }),
                // A bad URL is a configuration mistake, not an outage.
                Err(error @ (Error::InvalidConfig(_) | Error::InvalidDuration { .. })) => {
                    return Err(error);
                }
                Err(error) => {
                    nodes.push(Node {
                        label: label.clone(),
                        client: None,
                        connect_error: Some(error.to_string()),
                    });
                    failures.push(crate::error::NodeFailure {
                        node: label,
                        error: Box::new(error),
                    });
                }
            }
        }
        let connected = nodes.len() - failures.len();
        let needed = quorum::majority(nodes.len());
        if connected < needed {
            return Err(Error::QuorumFailed {
                op: "connect",
                name: String::new(),
                needed,
                nodes: nodes.len(),
                confirmed: connected,
                failures,
            });
        }
        for failure in &failures {
            tracing::warn!(node = %failure.node, error = %failure.error, "redlatch: Redlock node not connected");
        }
        Redlock::from_nodes(nodes)
    }

    fn from_nodes(nodes: Vec<Node>) -> Result<Redlock> {
        if nodes.is_empty() {
            return Err(Error::InvalidConfig(
                "a Redlock needs at least one node".to_owned(),
            ));
        }
        Ok(Redlock {
            inner: Arc::new(RedlockInner {
                id: Uuid::new_v4(),
                nodes,
                owner_seq: AtomicU64::new(0),
                stragglers: tokio_util::task::TaskTracker::new(),
            }),
            options: Options {
                node_timeout: None,
                retry_jitter: DEFAULT_RETRY_JITTER,
            },
        })
    }

    /// Sets how long each node may take to answer one call before it counts
    /// as failed for that call (locks made afterwards). Default: a third of
    /// the lease, at most 1 s, so that a fresh hold keeps at least two thirds
    /// of its lease as validity (the lease minus the time the fan-out took).
    /// A shorter timeout that is below the network's round trip means no
    /// node ever answers in time, and nobody acquires.
    ///
    /// # Errors
    /// [`Error::InvalidDuration`] unless 1 ms ≤ `timeout` ≤ 1 minute.
    pub fn with_node_timeout(mut self, timeout: Duration) -> Result<Redlock> {
        if timeout < Duration::from_millis(1) || timeout > Duration::from_secs(60) {
            return Err(Error::InvalidDuration {
                what: "node timeout",
                value: timeout,
                reason: "must be between 1 ms and 1 minute",
            });
        }
        self.options.node_timeout = Some(timeout);
        Ok(self)
    }

    /// Sets the upper bound of the random delay before retrying after a
    /// split vote (default 20 ms; zero retries at once).
    ///
    /// # Errors
    /// [`Error::InvalidDuration`] above 10 s.
    pub fn with_retry_jitter(mut self, jitter: Duration) -> Result<Redlock> {
        if jitter > Duration::from_secs(10) {
            return Err(Error::InvalidDuration {
                what: "retry jitter",
                value: jitter,
                reason: "must be at most 10 s",
            });
        }
        self.options.retry_jitter = jitter;
        Ok(self)
    }

    /// Number of nodes (masters), connected or not.
    pub fn node_count(&self) -> usize {
        self.inner.nodes.len()
    }

    /// How many nodes must agree: `node_count() / 2 + 1`.
    pub fn quorum(&self) -> usize {
        quorum::majority(self.inner.nodes.len())
    }

    /// The node labels, in order (URLs with passwords hidden, or `node <i>`).
    pub fn node_labels(&self) -> Vec<String> {
        self.inner
            .nodes
            .iter()
            .map(|node| node.label.clone())
            .collect()
    }

    /// The clients of the nodes that connected, in node order (to change
    /// their settings, or watch a settings file).
    pub fn clients(&self) -> Vec<Client> {
        self.inner
            .nodes
            .iter()
            .filter_map(|node| node.client.clone())
            .collect()
    }

    /// This Redlock's id, the first half of every owner it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The settings of the first connected node: the default lease and the
    /// retry policy of every Redlock acquire come from there.
    pub(crate) fn lead_settings(&self) -> Arc<Settings> {
        self.inner
            .nodes
            .iter()
            .find_map(|node| node.client.as_ref())
            .map(|client| client.core.current_settings())
            .unwrap_or_default()
    }

    /// Where the background rest of its calls runs: the first connected
    /// node's client's runtime (the ambient one when no node is connected).
    pub(crate) fn background(&self) -> Spawner {
        self.inner
            .nodes
            .iter()
            .find_map(|node| node.client.as_ref())
            .map_or_else(
                || Spawner::new(&tokio::runtime::Handle::current()),
                |client| client.core.background.clone(),
            )
    }

    /// A fresh owner name, unique to one acquisition and the same on every node.
    pub(crate) fn anonymous_owner(&self) -> Arc<str> {
        let seq = self.inner.owner_seq.fetch_add(1, Ordering::Relaxed);
        Arc::from(format!("{}:#{seq}", self.inner.id))
    }

    /// The per-node timeout for a lease of `lease_ms`.
    pub(crate) fn node_timeout(&self, lease_ms: u64) -> Duration {
        self.options.node_timeout.unwrap_or_else(|| {
            Duration::from_millis((lease_ms / 3).max(1)).min(DEFAULT_NODE_TIMEOUT_CAP)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_never_show_passwords() {
        let label = |url: &str| Client::builder(url).topology.servers.label();
        assert_eq!(label("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(label("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn an_empty_redlock_is_refused() {
        assert!(matches!(
            Redlock::new(Vec::new()),
            Err(Error::InvalidConfig(_))
        ));
    }
}

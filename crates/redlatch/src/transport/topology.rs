//! Where a client finds Redis, and what it asks of replicas.

use std::time::Duration;

use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::deployment::Servers;
use crate::settings::tls_files::TlsFiles;

/// Where a client finds Redis, and how it secures the connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    /// The servers; never `Redlock` here (a Redlock is built on clients).
    pub(crate) servers: Servers,
    /// Through Sentinel: the credentials of the master it names.
    pub(crate) master_auth: Option<MasterAuth>,
    /// Certificates for `rediss://` URLs; `None` uses the system's trust store.
    pub(crate) tls: Option<TlsFiles>,
    /// How wake-ups travel on a Redis Cluster.
    pub(crate) cluster_pubsub: ClusterPubSub,
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

/// A client's servers are never a Redlock: that is several clients.
pub(crate) fn redlock_refused() -> crate::error::Error {
    crate::error::Error::InvalidConfig(
        "a client talks to one deployment; Redlock is built on several clients".to_owned(),
    )
}

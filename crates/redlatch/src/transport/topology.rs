//! Where a client finds Redis, and what it asks of replicas.

use std::time::Duration;

use crate::transport::tls::TlsFiles;

/// Where a client finds Redis, and how it secures the connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) servers: Servers,
    /// Certificates for `rediss://` URLs; `None` uses the system's trust store.
    pub(crate) tls: Option<TlsFiles>,
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
}

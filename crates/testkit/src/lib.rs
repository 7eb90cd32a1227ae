//! Throwaway `redis-server` processes for redlatch's tests, benches and demos.
//!
//! Every [`RedisServer`] is a real `redis-server` child process on a free
//! port of `127.0.0.1`, with its own temp dir, no persistence and an empty
//! dataset. Tests can freeze it ([`pause`](RedisServer::pause)), crash it
//! ([`kill`](RedisServer::kill)) or bring it back empty on the same port
//! ([`restart`](RedisServer::restart)). Dropping it kills the process and
//! removes its temp dir; on Linux the process also dies with the test
//! process. [`Servers`] starts several independent ones at once;
//! [`ReplicaSet`] a master with replicas, [`SentinelGroup`] the same watched
//! by three Sentinels, [`Cluster`] a Redis Cluster; a [`Proxy`] puts network
//! faults (latency, loss, partitions) between a client and a server.
//!
//! The binary is found by [`redis_server_path`] (`REDIS_SERVER`, `PATH`,
//! `/usr/bin`, `/usr/local/bin`).
//!
//! ```
//! use testkit::{RedisServer, Servers};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut server = RedisServer::start()?;
//! let mut conn = server.conn();
//! redis::cmd("SET").arg("greeting").arg("hello").exec(&mut conn)?;
//!
//! // Crash it and bring it back: same port, empty dataset.
//! let port = server.port();
//! server.restart()?;
//! assert_eq!(server.port(), port);
//! let greeting: Option<String> = redis::cmd("GET").arg("greeting").query(&mut server.conn())?;
//! assert_eq!(greeting, None);
//!
//! // A password-protected server; its URL carries the credentials.
//! let secured = RedisServer::builder().password("s3cret").start()?;
//! assert!(secured.url().starts_with("redis://default:s3cret@127.0.0.1:"));
//!
//! // Five independent servers, e.g. for Redlock.
//! let masters = Servers::start(5)?;
//! assert_eq!(masters.urls().len(), 5);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod binary;
mod builder;
mod cluster;
mod process;
mod proxy;
mod ready;
mod replication;
mod sentinel;
mod server;
mod server_settings;
mod servers;
mod tls;

pub use binary::redis_server_path;
pub use cluster::Cluster;
pub use proxy::{Direction, LinkFaults, Proxy, RETRANSMISSION_TIMEOUT};
pub use replication::ReplicaSet;
pub use sentinel::{MASTER_NAME, SentinelGroup};
pub use server::RedisServer;
pub use server_settings::ServerBuilder;
pub use servers::Servers;
pub use tls::TlsCertificates;

#[cfg(test)]
mod tests;

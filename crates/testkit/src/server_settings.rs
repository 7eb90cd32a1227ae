//! What a [`RedisServer`](crate::RedisServer) is started with, as data: the
//! builder's fields (its methods are in `builder.rs`), the credentials a
//! client must present, and the names of the files in the server's
//! directory. Below the builder, the server and the readiness probe alike.

use std::path::PathBuf;

/// The server's configuration file, in its directory.
pub(crate) const CONFIG_FILE: &str = "redis.conf";
/// The server's own log.
pub(crate) const LOG_FILE: &str = "redis.log";
/// What the server wrote to stdout and stderr.
pub(crate) const STDIO_FILE: &str = "redis-stdio.log";

/// Configures a [`RedisServer`](crate::RedisServer) before starting it; get one with
/// [`RedisServer::builder`](crate::RedisServer::builder).
///
/// ```no_run
/// let server = testkit::RedisServer::builder()
///     .password("s3cret")
///     .arg("maxmemory", "10mb")
///     .start()?;
/// assert!(server.url().starts_with("redis://default:s3cret@127.0.0.1:"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    pub(crate) password: Option<String>,
    pub(crate) acl_user: Option<(String, String)>,
    pub(crate) args: Vec<(String, String)>,
    /// Run as a Sentinel (`redis-server CONF --sentinel`).
    pub(crate) sentinel: bool,
    pub(crate) env: Vec<(String, String)>,
    /// TLS files, and whether clients must present a certificate.
    pub(crate) tls: Option<TlsSettings>,
}

/// A server's TLS files, as `redis.conf` directives take them.
#[derive(Debug, Clone)]
pub(crate) struct TlsSettings {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) ca: PathBuf,
    pub(crate) client_certs: bool,
}

/// Credentials a client must present, as sent in `AUTH [user] password`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Auth<'a> {
    pub(crate) user: &'a str,
    pub(crate) password: &'a str,
}

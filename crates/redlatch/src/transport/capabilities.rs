//! What the server offers a lock library, learned once at connect: its name
//! and version, and for each feature redlatch can use whether it is there,
//! absent, or refused to this client. Nothing here is a surprise later: a
//! feature the server lacks or refuses has its fallback from the start.

use std::fmt;

use redis::Value;
use redis::aio::ConnectionLike;

/// Whether the server gives this client one feature.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Support {
    /// The server offers it to this client; redlatch uses it (where the
    /// client's settings ask for it).
    Available,
    /// This server (its kind or version) does not have it; the fallback is used.
    Absent,
    /// The server has it but refused it to this client (an ACL, a renamed or
    /// disabled command, a proxy); the fallback is used. The server's answer.
    Denied(String),
    /// Turned off in this client's settings; not asked for.
    Off,
}

impl Support {
    /// True for [`Support::Available`].
    pub fn is_available(&self) -> bool {
        matches!(self, Support::Available)
    }
}

impl fmt::Display for Support {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Support::Available => f.write_str("available"),
            Support::Absent => f.write_str("absent"),
            Support::Denied(why) => write!(f, "denied ({why})"),
            Support::Off => f.write_str("off"),
        }
    }
}

/// The server's kind and version, from `INFO server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersion {
    /// `redis` or `valkey` (the `server_name` field where the server gives one).
    pub name: String,
    /// Major, minor and patch version.
    pub version: (u32, u32, u32),
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor, patch) = self.version;
        write!(f, "{} {major}.{minor}.{patch}", self.name)
    }
}

/// What the server offered at connect ([`Client::capabilities`]).
///
/// [`Client::capabilities`]: crate::Client::capabilities
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The server's kind and version; `None` when `INFO` was refused.
    pub server: Option<ServerVersion>,
    /// The scripts as redlatch's function library (`FUNCTION LOAD`, `FCALL`;
    /// Redis and Valkey 7 and later): nothing to load again after a restart
    /// with persistence, a failover or `SCRIPT FLUSH`. Fallback: EVALSHA,
    /// loading a script on NOSCRIPT.
    pub functions: Support,
    /// `WAITAOF` (Redis and Valkey 7.2 and later): what
    /// [`ClientBuilder::wait_for_fsync`](crate::ClientBuilder::wait_for_fsync)
    /// needs. No fallback: a client that asks for it where it is missing
    /// fails to connect.
    pub wait_aof: Support,
    /// `CLIENT NO-EVICT ON` (Redis and Valkey 7 and later) on the command
    /// connection, which carries the renewals, and on the loss watch's: a
    /// server short of client memory (`maxmemory-clients`) closes other
    /// clients first. Set again once per renewal round while holds are
    /// renewed, so a reconnection gets it back within a renewal period.
    /// Subscription connections do not get it (a RESP2 subscriber cannot
    /// send it); an evicted one resubscribes and its waiters look at their
    /// locks again. Absent on a cluster (the client cannot address its
    /// node connections one by one). Fallback: none needed, the client works
    /// as before, evictable.
    pub no_evict: Support,
}

impl Capabilities {
    pub(crate) fn new(
        server: Option<ServerVersion>,
        functions: Support,
        wait_aof: Support,
        no_evict: Support,
    ) -> Capabilities {
        Capabilities {
            server,
            functions,
            wait_aof,
            no_evict,
        }
    }

    /// One line for logs and `redlatch status --verbose`, e.g.
    /// `valkey 8.1.8: functions available, WAITAOF available, NO-EVICT available`.
    pub fn summary(&self) -> String {
        let server = self.server.as_ref().map_or_else(
            || "server of unknown version".to_owned(),
            ToString::to_string,
        );
        format!(
            "{server}: functions {}, WAITAOF {}, NO-EVICT {}",
            self.functions, self.wait_aof, self.no_evict
        )
    }
}

/// The server's version (`INFO server`; `None` when refused or unreadable).
pub(crate) async fn server_version(conn: &mut impl ConnectionLike) -> Option<ServerVersion> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok()?;
    parse_server_version(&info)
}

fn parse_server_version(info: &str) -> Option<ServerVersion> {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
    };
    // Valkey gives its own name and version beside a Redis-compatible one.
    let (name, version) = match (field("server_name"), field("valkey_version")) {
        (Some(name), Some(version)) => (name, version),
        (_, Some(version)) => ("valkey", version),
        _ => ("redis", field("redis_version")?),
    };
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some(ServerVersion {
        name: name.to_owned(),
        version: (major, minor, patch),
    })
}

/// Whether the server has `command` (`COMMAND INFO`): available, absent, or
/// `None` when the server would not say.
async fn has_command(conn: &mut impl ConnectionLike, command: &str) -> Option<bool> {
    let reply: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(command)
        .query_async(conn)
        .await
        .ok()?;
    match reply {
        Value::Array(entries) => Some(entries.iter().any(|entry| !matches!(entry, Value::Nil))),
        _ => None,
    }
}

/// Whether `WAITAOF` is there: asked with `COMMAND INFO`, else judged by the
/// version (7.2 and later).
pub(crate) async fn wait_aof(
    conn: &mut impl ConnectionLike,
    server: Option<&ServerVersion>,
) -> Support {
    let by_version = server.map(|server| server.version >= (7, 2, 0));
    match (has_command(conn, "WAITAOF").await, by_version) {
        (Some(true), _) => Support::Available,
        // Renamed or disabled where the version has it.
        (Some(false), Some(true)) => {
            Support::Denied("the server does not list WAITAOF (renamed or disabled)".to_owned())
        }
        (Some(false), _) => Support::Absent,
        (None, Some(true)) => Support::Available,
        (None, _) => Support::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_of_redis_and_valkey_are_read_from_info() {
        let redis = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(
            parse_server_version(redis),
            Some(ServerVersion {
                name: "redis".to_owned(),
                version: (7, 0, 15)
            })
        );
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n";
        assert_eq!(
            parse_server_version(valkey).map(|v| v.to_string()),
            Some("valkey 8.1.8".to_owned())
        );
        assert_eq!(parse_server_version("# Server\r\n"), None);
    }
}

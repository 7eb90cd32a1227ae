//! What the server offers a lock library, learned once at connect: its name
//! and version, and for each feature redlatch can use whether it is there,
//! absent, or refused to this client. Nothing here is a surprise later: a
//! feature the server lacks or refuses has its fallback from the start.

use std::fmt;

use redis::aio::ConnectionLike;
use redis::{RedisError, RedisResult, Value};

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
    /// `SET key value IFEQ old` (Valkey 8.1 and later, Redis 8.4 and
    /// later): a write that happens only while the key holds `old`, and never
    /// creates a missing key. Probed at connect by one such `SET` on a
    /// throwaway key under the client's key prefix, with a value it cannot
    /// hold (nothing is written); where the probe gets no clear answer, judged
    /// by the version.
    pub set_ifeq: Support,
    /// `DELIFEQ key value` (Valkey 9.0 and later): a delete that happens
    /// only while the key holds `value`. Asked with `COMMAND INFO`, else
    /// judged by the version.
    pub delifeq: Support,
    /// `DELEX key IFEQ value` (Redis 8.4 and later): Redis's form of the
    /// same conditional delete. Asked with `COMMAND INFO`, else judged by
    /// the version.
    pub delex_ifeq: Support,
    /// Per-field expiry in hashes, `HPEXPIRE` (Redis 7.4 and later, Valkey
    /// 9.0 and later; `HSETEX` from Redis 8.0). Asked with `COMMAND INFO`,
    /// else judged by the version.
    pub hash_field_expiry: Support,
    /// A scripting engine: `EVAL`, `EVALSHA` and `FUNCTION` run Lua (Valkey
    /// 9.1 can run without its Lua module, and then lists these commands but
    /// refuses every script). Known from the function library's load, or
    /// else from one `SCRIPT LOAD` of the smallest script (`return 1`).
    /// Every lock of this client
    /// runs as a script: where it is [`Support::Absent`], connect fails
    /// with [`Error::ServerLacks`](crate::Error::ServerLacks). A refusal to
    /// this client (an ACL without `+script|load`) is
    /// [`Support::Denied`]: connect goes on, and the first call says what
    /// the server refused.
    pub scripting: Support,
}

impl Capabilities {
    /// One line for logs and `redlatch status --verbose`, e.g.
    /// `valkey 9.1.2: scripting available, functions available, WAITAOF
    /// available, NO-EVICT available, SET IFEQ available, DELIFEQ available,
    /// DELEX IFEQ absent, hash-field expiry available` (on one line).
    pub fn summary(&self) -> String {
        let server = self.server.as_ref().map_or_else(
            || "server of unknown version".to_owned(),
            ToString::to_string,
        );
        format!(
            "{server}: scripting {}, functions {}, WAITAOF {}, NO-EVICT {}, SET IFEQ {}, \
             DELIFEQ {}, DELEX IFEQ {}, hash-field expiry {}",
            self.scripting,
            self.functions,
            self.wait_aof,
            self.no_evict,
            self.set_ifeq,
            self.delifeq,
            self.delex_ifeq,
            self.hash_field_expiry
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

/// Whether the server lists each of `commands` (`COMMAND INFO`, one call
/// for all): `None` when the server would not say (an ACL without
/// `+command|info`, a proxy).
async fn has_commands(conn: &mut impl ConnectionLike, commands: &[&str]) -> Option<Vec<bool>> {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("INFO");
    for command in commands {
        cmd.arg(*command);
    }
    let reply: Value = cmd.query_async(conn).await.ok()?;
    match reply {
        Value::Array(entries) if entries.len() == commands.len() => Some(
            entries
                .iter()
                .map(|entry| !matches!(entry, Value::Nil))
                .collect(),
        ),
        _ => None,
    }
}

/// Whether this server's kind and version have a feature that Redis has
/// from `redis` on and Valkey from `valkey` on (`None`: not that kind);
/// `None` when the version is unknown.
fn by_version(
    server: Option<&ServerVersion>,
    redis: Option<(u32, u32, u32)>,
    valkey: Option<(u32, u32, u32)>,
) -> Option<bool> {
    let server = server?;
    let since = match server.name.as_str() {
        "valkey" => valkey,
        "redis" => redis,
        _ => return None,
    };
    Some(since.is_some_and(|since| server.version >= since))
}

/// A command's support from whether the server lists it (`None`: it would
/// not say) and whether its version has it (`None`: unknown).
fn judge_listed(command: &str, listed: Option<bool>, by_version: Option<bool>) -> Support {
    match (listed, by_version) {
        (Some(true), _) => Support::Available,
        // Renamed or disabled where the version has it.
        (Some(false), Some(true)) => Support::Denied(format!(
            "the server does not list {command} (renamed or disabled)"
        )),
        (Some(false), _) => Support::Absent,
        (None, Some(true)) => Support::Available,
        (None, _) => Support::Absent,
    }
}

/// Whether `WAITAOF` is there: asked with `COMMAND INFO`, else judged by the
/// version (7.2 and later).
pub(crate) async fn wait_aof(
    conn: &mut impl ConnectionLike,
    server: Option<&ServerVersion>,
) -> Support {
    let since = Some((7, 2, 0));
    let listed = has_commands(conn, &["WAITAOF"]).await;
    judge_listed(
        "WAITAOF",
        listed.map(|listed| listed[0]),
        by_version(server, since, since),
    )
}

/// The commands a lock can use in place of a script, asked in one
/// `COMMAND INFO`, else judged by the version.
#[derive(Debug)]
pub(crate) struct ScriptFreeCommands {
    /// `DELIFEQ` (Valkey 9.0 and later).
    pub(crate) delifeq: Support,
    /// `DELEX ... IFEQ` (Redis 8.4 and later: `DELEX` came with `IFEQ`).
    pub(crate) delex_ifeq: Support,
    /// `HPEXPIRE` (Redis 7.4 and later, Valkey 9.0 and later).
    pub(crate) hash_field_expiry: Support,
}

impl ScriptFreeCommands {
    /// Each absent: what a client that could not ask in time assumes.
    pub(crate) fn absent() -> ScriptFreeCommands {
        ScriptFreeCommands {
            delifeq: Support::Absent,
            delex_ifeq: Support::Absent,
            hash_field_expiry: Support::Absent,
        }
    }
}

/// Asks for `DELIFEQ`, `DELEX` and `HPEXPIRE` in one `COMMAND INFO`; a
/// server that will not say is judged by its version.
pub(crate) async fn script_free_commands(
    conn: &mut impl ConnectionLike,
    server: Option<&ServerVersion>,
) -> ScriptFreeCommands {
    const ASKED: [&str; 3] = ["DELIFEQ", "DELEX", "HPEXPIRE"];
    let listed = has_commands(conn, &ASKED).await;
    let listed = |n: usize| listed.as_ref().map(|listed| listed[n]);
    ScriptFreeCommands {
        delifeq: judge_listed(
            "DELIFEQ",
            listed(0),
            by_version(server, None, Some((9, 0, 0))),
        ),
        delex_ifeq: judge_listed(
            "DELEX",
            listed(1),
            by_version(server, Some((8, 4, 0)), None),
        ),
        hash_field_expiry: judge_listed(
            "HPEXPIRE",
            listed(2),
            by_version(server, Some((7, 4, 0)), Some((9, 0, 0))),
        ),
    }
}

/// Whether `SET key value IFEQ old` is there: one such `SET` on `key` (a
/// throwaway key under the client's prefix, which the server does not create:
/// a missing key is never written by `IFEQ`, and the compared value is
/// fresh), judged by its answer; an answer that says nothing of `IFEQ` (out
/// of memory, no answer) is judged by the version (Valkey 8.1, Redis 8.4).
pub(crate) async fn set_ifeq(
    conn: &mut impl ConnectionLike,
    server: Option<&ServerVersion>,
    key: &str,
) -> Support {
    let unmatched = uuid::Uuid::new_v4().to_string();
    let answer = redis::cmd("SET")
        .arg(key)
        .arg("redlatch capability probe")
        .arg("IFEQ")
        .arg(unmatched)
        .query_async::<Value>(conn)
        .await;
    judge_set_ifeq(answer, by_version(server, Some((8, 4, 0)), Some((8, 1, 0))))
}

fn judge_set_ifeq(answer: RedisResult<Value>, by_version: Option<bool>) -> Support {
    let error = match answer {
        // Nil: not written (the key is missing, or holds another value).
        Ok(_) => return Support::Available,
        Err(error) => error,
    };
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    if error.code() == Some("NOPERM") {
        Support::Denied(error.to_string())
    } else if detail.contains("syntax error") {
        // The server does not know the option.
        match by_version {
            Some(true) => Support::Denied(format!("SET ... IFEQ refused: {error}")),
            _ => Support::Absent,
        }
    } else if by_version == Some(true) {
        Support::Available
    } else {
        Support::Absent
    }
}

/// The server answered that it has no scripting engine: Valkey 9.1 without
/// its Lua module answers `EVAL` and `SCRIPT LOAD` with "Could not find
/// scripting engine 'lua'" and `FUNCTION LOAD` with "Engine 'lua' not found".
pub(crate) fn no_scripting_engine(error: &RedisError) -> bool {
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    detail.contains("scripting engine")
        || (detail.contains("engine") && detail.contains("not found"))
}

/// Whether the server runs scripts: known where `functions` (the function
/// library's load) is available, else asked by loading `source` (the
/// smallest script will do) with `SCRIPT LOAD`.
pub(crate) async fn scripting(
    conn: &mut impl ConnectionLike,
    functions: &Support,
    source: &str,
) -> Support {
    if functions.is_available() {
        return Support::Available;
    }
    let answer = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query_async::<Value>(conn)
        .await;
    match answer {
        Ok(_) => Support::Available,
        Err(error) if no_scripting_engine(&error) => Support::Absent,
        Err(error) => Support::Denied(error.to_string()),
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

    fn server_error(reply: &[u8]) -> RedisError {
        match redis::parse_redis_value(reply) {
            Ok(Value::ServerError(error)) => error.into(),
            other => panic!("{other:?}"),
        }
    }

    fn server(name: &str, version: (u32, u32, u32)) -> ServerVersion {
        ServerVersion {
            name: name.to_owned(),
            version,
        }
    }

    #[test]
    fn versions_say_which_kind_has_what() {
        let valkey_9 = server("valkey", (9, 1, 2));
        let redis_8 = server("redis", (8, 2, 3));
        let delifeq = |server| by_version(Some(server), None, Some((9, 0, 0)));
        assert_eq!(delifeq(&valkey_9), Some(true));
        assert_eq!(delifeq(&redis_8), Some(false));
        assert_eq!(delifeq(&server("valkey", (8, 1, 8))), Some(false));
        let expiry = |server| by_version(Some(server), Some((7, 4, 0)), Some((9, 0, 0)));
        assert_eq!(expiry(&redis_8), Some(true));
        assert_eq!(expiry(&server("redis", (7, 0, 15))), Some(false));
        assert_eq!(by_version(None, Some((7, 4, 0)), None), None);
        assert_eq!(
            by_version(Some(&server("other", (9, 0, 0))), None, None),
            None
        );
    }

    #[test]
    fn a_listed_command_is_there_and_an_unlisted_one_where_the_version_has_it_is_denied() {
        assert_eq!(
            judge_listed("X", Some(true), Some(false)),
            Support::Available
        );
        assert_eq!(judge_listed("X", Some(false), Some(false)), Support::Absent);
        assert!(matches!(
            judge_listed("X", Some(false), Some(true)),
            Support::Denied(why) if why.contains("X")
        ));
        // COMMAND refused: the version decides.
        assert_eq!(judge_listed("X", None, Some(true)), Support::Available);
        assert_eq!(judge_listed("X", None, None), Support::Absent);
    }

    #[test]
    fn set_ifeq_is_judged_by_the_server_s_answer_first() {
        assert_eq!(judge_set_ifeq(Ok(Value::Nil), None), Support::Available);
        let syntax = || Err(server_error(b"-ERR syntax error\r\n"));
        assert_eq!(judge_set_ifeq(syntax(), Some(false)), Support::Absent);
        assert_eq!(judge_set_ifeq(syntax(), None), Support::Absent);
        assert!(matches!(
            judge_set_ifeq(syntax(), Some(true)),
            Support::Denied(_)
        ));
        let noperm = server_error(b"-NOPERM No permissions to access a key\r\n");
        assert!(matches!(
            judge_set_ifeq(Err(noperm), Some(true)),
            Support::Denied(_)
        ));
        let oom = || {
            Err(server_error(
                b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            ))
        };
        assert_eq!(judge_set_ifeq(oom(), Some(true)), Support::Available);
        assert_eq!(judge_set_ifeq(oom(), Some(false)), Support::Absent);
    }

    #[test]
    fn a_server_without_a_scripting_engine_is_told_from_one_that_refuses_scripts() {
        for reply in [
            &b"-ERR Could not find scripting engine 'lua'\r\n"[..],
            b"-ERR Engine 'lua' not found\r\n",
        ] {
            assert!(no_scripting_engine(&server_error(reply)), "{reply:?}");
        }
        for reply in [
            &b"-NOPERM User app has no permissions to run the 'script|load' command\r\n"[..],
            b"-ERR unknown command 'SCRIPT', with args beginning with: 'LOAD'\r\n",
            b"-ERR Error compiling script\r\n",
        ] {
            assert!(!no_scripting_engine(&server_error(reply)), "{reply:?}");
        }
    }
}

//! redlatch's scripts as one Redis function library (`FUNCTION LOAD`,
//! Redis 7 and Valkey), so that a restart with persistence, a failover or a
//! `SCRIPT FLUSH` leaves nothing to load again: functions are kept in the
//! RDB and AOF files and replicated, where the script cache is neither.
//!
//! The library's text is built from the primitives' scripts
//! (`scripts/library_source.rs`) and handed to the connection at connect
//! ([`install`]); loading it again when the server lost it reads it there.
//! A server that does not offer functions, or refuses them to this client
//! (an ACL, a renamed command, a proxy), gets the same scripts by EVALSHA.

use redis::{ErrorKind, RedisError, RedisResult};

use crate::transport::Connection;
use crate::transport::capabilities::{self, Support};
use crate::transport::script_routes::FunctionLibrary;

/// Loads the connection's library on the server, or on every master of a
/// cluster, where it is missing. Never with `REPLACE`: the library is named
/// after its content, so a copy of that name is this library, and a server
/// answers a load of a library it has at once, before compiling anything.
/// So a fleet of clients that connects costs each server one compile, not
/// one each.
pub(crate) async fn load(conn: &mut Connection) -> RedisResult<()> {
    let Some(library) = conn.script_routes().library() else {
        return Err(RedisError::from((
            ErrorKind::Client,
            "no function library was handed to this connection",
        )));
    };
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg(library.source);
    if !conn.is_cluster() {
        return loaded(cmd.query_async::<String>(conn).await);
    }
    // Each master on its own: a master that has the library refuses the
    // load, and a cluster client that sent it to all would fail it all.
    let masters = conn.keyspace_nodes().await?;
    let loads = masters.iter().map(|node| {
        let (mut conn, cmd) = (conn.clone(), cmd.clone());
        async move { loaded(conn.query_on::<String>(node, &cmd).await) }
    });
    futures_util::future::join_all(loads)
        .await
        .into_iter()
        .collect()
}

/// A load's answer: loaded now, or there already.
fn loaded(answer: RedisResult<String>) -> RedisResult<()> {
    match answer {
        Ok(_) => Ok(()),
        Err(error) if already_loaded(&error) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Hands `library` to the connection, loads it at connect and says whether
/// scripts run as its functions from now on. `server_has_functions` is what
/// the server's version says (Redis and Valkey 7 and later).
pub(crate) async fn install(
    conn: &mut Connection,
    library: FunctionLibrary,
    server_has_functions: bool,
) -> Support {
    conn.script_routes().set_library(library);
    let support = match load(conn).await {
        Ok(()) => Support::Available,
        Err(error) if refused(&error) && !server_has_functions => Support::Absent,
        // No Lua at all (Valkey 9.1 without its Lua module).
        Err(error) if capabilities::no_scripting_engine(&error) => Support::Absent,
        Err(error) => Support::Denied(error.to_string()),
    };
    conn.script_routes()
        .set_functions(matches!(support, Support::Available));
    support
}

/// The server answered that the function is not there: it lost the library
/// (a restart without persistence, `FUNCTION FLUSH`, a new cluster node).
pub(crate) fn lost(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|detail| detail.contains("Function not found"))
}

/// The server refuses functions to this client: FCALL or FUNCTION unknown
/// (an old server, a renamed or disabled command) or denied by an ACL. A
/// key an ACL forbids is not this: that refusal is the key's own.
pub(crate) fn refused(error: &RedisError) -> bool {
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    let names_functions = detail.contains("'fcall'") || detail.contains("'function");
    match error.code() {
        Some("ERR") => detail.starts_with("unknown command") && names_functions,
        Some("NOPERM") => names_functions,
        _ => false,
    }
}

fn already_loaded(error: &RedisError) -> bool {
    error
        .detail()
        .is_some_and(|detail| detail.contains("already exists"))
}

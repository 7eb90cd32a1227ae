//! redlatch's scripts as one Redis function library (`FUNCTION LOAD`,
//! Redis 7 and Valkey), so that a restart with persistence, a failover or a
//! `SCRIPT FLUSH` leaves nothing to load again: functions are kept in the
//! RDB and AOF files and replicated, where the script cache is neither.
//!
//! The library is named after its content (`redlatch_<12 hex>`), and so are
//! its functions (`redlatch_<12 hex>_acquire`): clients of different
//! redlatch versions each load and call their own, side by side. A server
//! that does not offer functions, or refuses them to this client (an ACL,
//! a renamed command, a proxy), gets the same scripts by EVALSHA.

use std::sync::LazyLock;

use redis::{RedisError, RedisResult, Script};

use crate::scripts::Lua;
use crate::transport::Connection;
use crate::transport::capabilities::{self, Support};

/// The library's name and source.
struct Library {
    name: String,
    source: String,
}

/// The lease rule as the scripts carry it, and in the form functions use:
/// every server with functions has `PEXPIRE GT`, which lengthens a lease in
/// one call where the portable form reads the TTL first.
const LEASE: &str = include_str!("../../scripts/lib/lease.lua");
const LEASE_GT: &str = include_str!("../../scripts/lib/lease_gt.lua");

/// What a script of this source runs as a function.
fn function_body(source: &str) -> String {
    source.replacen(LEASE, LEASE_GT, 1)
}

/// The script `lua` as the library's local `redlatch_script_{n}`: its
/// shared parts (local functions only) run once, when the library loads,
/// and the callback closes over them, so a call creates none of them again.
fn function_text(n: usize, lua: &Lua) -> String {
    format!(
        "local redlatch_script_{n}\ndo\n{}redlatch_script_{n} = function(KEYS, ARGV)\n{}\nend\nend\n",
        function_body(lua.parts),
        lua.body
    )
}

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let scripts = super::every_script();
    let bodies: Vec<String> = scripts
        .iter()
        .enumerate()
        .map(|(n, lua)| function_text(n, lua))
        .collect();
    // Named after what it holds: the SHA-1 of every function's name, body and flags.
    let content: String = scripts
        .iter()
        .zip(&bodies)
        .map(|(lua, body)| {
            format!(
                "{} {} {:?}\n",
                lua.name,
                Script::new(body).get_hash(),
                lua.flags
            )
        })
        .collect();
    let name = format!("redlatch_{}", &Script::new(&content).get_hash()[..12]);
    let mut source = format!("#!lua name={name}\n");
    for (n, (lua, body)) in scripts.iter().zip(&bodies).enumerate() {
        let flags: Vec<String> = lua.flags.iter().map(|flag| format!("'{flag}'")).collect();
        source.push_str(&format!(
            "{body}\
             redis.register_function{{function_name='{name}_{}', callback=redlatch_script_{n}, flags={{{}}}}}\n",
            lua.name,
            flags.join(", "),
        ));
    }
    Library { name, source }
});

/// The library's name, e.g. `redlatch_0123456789ab`.
#[cfg(test)]
fn name() -> &'static str {
    &LIBRARY.name
}

/// The name the script named `script` has in the library.
pub(crate) fn function_name(script: &str) -> String {
    format!("{}_{script}", LIBRARY.name)
}

/// Loads the library on the server, or on every master of a cluster, where
/// it is missing. Never with `REPLACE`: the library is named after its
/// content, so a copy of that name is this library, and a server answers a
/// load of a library it has at once, before compiling anything. So a fleet
/// of clients that connects costs each server one compile, not one each.
pub(crate) async fn load(conn: &mut Connection) -> RedisResult<()> {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg(&LIBRARY.source);
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

/// Loads the library at connect and says whether scripts run as its
/// functions from now on. `server_has_functions` is what the server's
/// version says (Redis and Valkey 7 and later).
pub(crate) async fn install(conn: &mut Connection, server_has_functions: bool) -> Support {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_holds_every_script_under_a_name_of_its_content() {
        let scripts = super::super::every_script();
        assert!(
            scripts.iter().any(|lua| lua.source.contains(LEASE)),
            "no script carries the lease rule"
        );
        assert!(name().starts_with("redlatch_") && name().len() == "redlatch_".len() + 12);
        for lua in &scripts {
            let registered = format!("function_name='{}'", function_name(&lua.name));
            assert!(
                LIBRARY.source.contains(&registered),
                "{} is not in the library",
                lua.name
            );
            if lua.source.contains(LEASE) {
                let text = function_text(0, lua);
                assert!(
                    text.contains("'GT'") && !text.contains(LEASE),
                    "{} keeps the portable lease rule in the library",
                    lua.name
                );
            }
            assert!(
                lua.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{:?} is not a valid function name",
                lua.name
            );
        }
    }
}

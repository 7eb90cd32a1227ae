//! Walking the keyspace: `SCAN ... MATCH ... TYPE`, on every master of a
//! cluster, never `KEYS` (which blocks the server).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::transport::{Connection, bounded};

/// Keys asked for per SCAN call: large enough to be quick, small enough not
/// to block the server.
const SCAN_COUNT: usize = 1000;

/// Every key matching `pattern` whose type is one of `kinds`, on the
/// server or on each master of a cluster; each SCAN call is bounded by
/// `limit` and reported as `op`. A key that is not UTF-8 names nothing
/// this library writes: it is left out, not an error for the others.
///
/// A client connected to one node of a Redis Cluster would see only that
/// node's keys: [`Error::ClusterNode`] when the server says
/// `cluster_enabled:1`.
pub(crate) async fn keys_matching(
    conn: &mut Connection,
    op: &'static str,
    pattern: &str,
    kinds: &[&str],
    limit: Duration,
) -> Result<BTreeSet<String>> {
    let nodes = bounded(op, limit, async {
        conn.keyspace_nodes()
            .await
            .map_err(|error| Error::from_redis(op, error))
    })
    .await?;
    if !conn.is_cluster() {
        refuse_cluster_node(conn, op, limit).await?;
    }
    let mut keys = BTreeSet::new();
    // Nested loops, not an iterator of pairs: a closure borrowing `kinds`
    // inside the future makes it not `Send` for every lifetime.
    for node in &nodes {
        for kind in kinds {
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .arg("TYPE")
                    .arg(*kind);
                let call = async {
                    conn.query_on::<(u64, Vec<Vec<u8>>)>(node, &scan)
                        .await
                        .map_err(|error| Error::from_redis(op, error))
                };
                let (next, batch) = bounded(op, limit, call).await?;
                keys.extend(
                    batch
                        .into_iter()
                        .filter_map(|key| String::from_utf8(key).ok()),
                );
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    Ok(keys)
}

/// A walk over one node of a Redis Cluster would miss the other nodes'
/// keys: [`Error::ClusterNode`] when the server says `cluster_enabled:1`.
/// A server that refuses `INFO` (an ACL without it) is walked as it is.
async fn refuse_cluster_node(
    conn: &mut Connection,
    op: &'static str,
    limit: Duration,
) -> Result<()> {
    let info = bounded(op, limit, async {
        Ok(redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(conn)
            .await)
    })
    .await?;
    match info {
        Ok(info) if info.lines().any(|line| line.trim() == "cluster_enabled:1") => {
            Err(Error::ClusterNode {
                op,
                detail: "cluster_enabled:1: a walk over it would miss the other nodes' keys"
                    .to_owned(),
            })
        }
        _ => Ok(()),
    }
}

/// Escapes the characters SCAN's MATCH treats as a pattern.
pub(crate) fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(escape_glob("job:[a]*?\\"), "job:\\[a\\]\\*\\?\\\\");
        assert_eq!(escape_glob("plain"), "plain");
    }
}

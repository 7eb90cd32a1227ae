//! Finding the locks on a server: SCAN, never KEYS.

use std::collections::BTreeSet;

use crate::base::status::LockStatus;
use crate::base::status::{KeyKind, read_with_kind};
use crate::client::Client;
use crate::deadlock::WAIT_KEY_PREFIX;
use crate::error::{Error, Result};
use crate::scripts::holder_keys::looks_like_owner;
use crate::transport::bounded;

/// Keys asked for per SCAN call: large enough to be quick, small enough not
/// to block the server.
const SCAN_COUNT: usize = 1000;

/// A walk over one node of a Redis Cluster would miss the other nodes'
/// locks: [`Error::ClusterNode`] when the server says `cluster_enabled:1`.
/// A server that refuses `INFO` (an ACL without it) is walked as it is.
async fn refuse_cluster_node(
    conn: &mut crate::transport::Connection,
    limit: std::time::Duration,
) -> Result<()> {
    let info = bounded("scan", limit, async {
        Ok(redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(conn)
            .await)
    })
    .await?;
    match info {
        Ok(info) if info.lines().any(|line| line.trim() == "cluster_enabled:1") => {
            Err(Error::ClusterNode {
                op: "scan",
                detail: "cluster_enabled:1: a walk over it would miss the other nodes' locks"
                    .to_owned(),
            })
        }
        _ => Ok(()),
    }
}

impl Client {
    /// The locks held now whose names start with `name_prefix` (under this
    /// client's key prefix), sorted by name.
    ///
    /// Walks the keyspace with `SCAN ... MATCH prefix* TYPE hash`, then
    /// `TYPE string` (never `KEYS`, which blocks the server), and reads each
    /// key found with [`Lock::status`](crate::Lock::status). It keeps the
    /// hashes whose fields look like lock owners (`<uuid>:<owner>`, as
    /// redlatch and Redisson write them), and the strings that look like a
    /// token lock: a [`TokenLock`](crate::TokenLock)'s token, or any other
    /// value but a number under a lease (another library's `SET key token
    /// NX PX lease`; a number is a counter or a count, not a lock).
    /// Costs one round trip per 1000 keys scanned (of each type) plus two per key found
    /// (on a cluster, one more to list the masters, and the walk visits each
    /// master; elsewhere, one `INFO cluster`). A lock taken or released
    /// during the walk may or may not be listed.
    ///
    /// # Errors
    /// Connection errors; [`Error::ClusterNode`] when a client connected to
    /// one server finds a Redis Cluster node (it would list only that
    /// node's locks); a key that changes type during the walk is skipped.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn locks(&self, name_prefix: &str) -> Result<Vec<LockStatus>> {
        let settings = self.core.current_settings();
        let pattern = format!(
            "{}{}*",
            escape_glob(&settings.key_prefix),
            escape_glob(name_prefix)
        );
        let mut keys = BTreeSet::new();
        // A cluster spreads the keyspace over its masters: walk each of them.
        let mut conn = self.core.conn.clone();
        let nodes = bounded("scan", settings.response_timeout, async {
            conn.keyspace_nodes()
                .await
                .map_err(|error| Error::from_redis("scan", error))
        })
        .await?;
        if !conn.is_cluster() {
            refuse_cluster_node(&mut conn, settings.response_timeout).await?;
        }
        for (node, kind) in nodes
            .iter()
            .flat_map(|node| ["hash", "string"].map(|kind| (node, kind)))
        {
            let mut cursor: u64 = 0;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .arg("TYPE")
                    .arg(kind);
                let call = async {
                    conn.query_on::<(u64, Vec<String>)>(node, &scan)
                        .await
                        .map_err(|error| Error::from_redis("scan", error))
                };
                let (next, batch) = bounded("scan", settings.response_timeout, call).await?;
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        let mut locks = Vec::new();
        for key in keys {
            let Some(name) = key.strip_prefix(settings.key_prefix.as_str()) else {
                continue;
            };
            if name.starts_with(WAIT_KEY_PREFIX) {
                // A wait-for edge (deadlock detection): a string with an
                // expiry, and no lock.
                continue;
            }
            match read_with_kind(&self.core, name).await {
                Ok((status, kind)) if is_listed(&status, kind) => locks.push(status),
                Ok(_) | Err(Error::WrongType { .. }) | Err(Error::InvalidName { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(locks)
    }
}

/// True when a key read as a lock is one to list: a hash whose fields all
/// look like owners; a string holding an owner token, or anything but a
/// number under a lease.
fn is_listed(status: &LockStatus, kind: KeyKind) -> bool {
    let owners = status
        .holders
        .iter()
        .all(|holder| looks_like_owner(&holder.owner));
    match kind {
        KeyKind::Free => false,
        KeyKind::Hash => status.held && owners,
        KeyKind::String => {
            owners
                || status.ttl.is_some()
                    && status
                        .holders
                        .iter()
                        .all(|holder| holder.owner.trim().parse::<f64>().is_err())
        }
    }
}

/// Escapes the characters SCAN's MATCH treats as a pattern.
fn escape_glob(text: &str) -> String {
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

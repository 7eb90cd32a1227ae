//! Finding the locks on a server: SCAN, never KEYS.

use crate::base::status::LockStatus;
use crate::base::status::{KeyKind, read_with_kind};
use crate::client::Client;
use crate::client::scan::{escape_glob, keys_matching};
use crate::deadlock::WAIT_KEY_PREFIX;
use crate::error::{Error, Result};
use crate::scripts::holder_keys::looks_like_owner;

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
        // A cluster spreads the keyspace over its masters: walk each of them.
        let mut conn = self.core.conn.clone();
        let keys = keys_matching(
            &mut conn,
            "scan",
            &pattern,
            &["hash", "string"],
            settings.response_timeout,
        )
        .await?;
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

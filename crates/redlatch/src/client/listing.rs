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
    /// during the walk may or may not be listed. The library's own keys
    /// (wait-for edges, request records, next-turn claims, counters,
    /// lines and holder records; of this key prefix or a longer one) and
    /// keys that are not UTF-8 are not locks, and are left out.
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
            if is_internal_key(name) {
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

/// What the names of the library's own keys that are no lock start with
/// (docs/REDIS-DATA.md): wait-for edges, request records, next-turn
/// claims, the fencing counters, fair-lock and writer lines, holder
/// records. Some are strings with an expiry, which the listing would
/// otherwise take for another library's `SET NX PX` lock.
const INTERNAL_KEYS: [&str; 8] = [
    WAIT_KEY_PREFIX,
    "redlatch_request:",
    "redlatch_lock_precedence:",
    "redlatch_lock_token",
    "redlatch_fair_alive:",
    "redlatch_fair_terms:",
    "redlatch_rwlock_writers:",
    "redlatch_holder:",
];

/// True when `name` (the key prefix taken off) is one of the library's own
/// keys, of this key prefix or of a longer one (`team:redlatch_wait:...`
/// under `app:` is the edge of clients whose prefix is `app:team:`).
fn is_internal_key(name: &str) -> bool {
    let internal = |rest: &str| INTERNAL_KEYS.iter().any(|key| rest.starts_with(key));
    internal(name)
        || name
            .match_indices(':')
            .any(|(at, _)| internal(&name[at + 1..]))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_s_own_keys_of_this_and_longer_prefixes_are_internal() {
        for name in [
            "redlatch_wait:n:w",
            "team:redlatch_wait:n:w",
            "a:b:redlatch_wait:{tag}:n:w",
            "redlatch_request:{orders}:0123456789abcdef0123456789abcdef",
            "redlatch_lock_precedence:{dl:close:2}",
            "redlatch_lock_token",
            "redlatch_lock_token:{42}",
            "redlatch_holder:{8dc4a6bb-279c-4943-9939-4b799f9d57df}",
        ] {
            assert!(is_internal_key(name), "{name}");
        }
        for name in ["orders", "myredlatch_wait:x", "jobs:nightly", "{orders}:a"] {
            assert!(!is_internal_key(name), "{name}");
        }
    }
}

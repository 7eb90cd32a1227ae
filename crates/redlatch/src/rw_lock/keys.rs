//! Redis key names of one read-write lock, in Redisson's `RReadWriteLock`
//! layout: `RwKeys`, the read holds' timeout keys, the write hold's field.

use crate::base::keys::{LOCK_SPLIT, LockKeys};
use crate::error::Result;
use crate::scripts::keys::{hash_tagged, one_slot, prefix_name, suffix_name};
use crate::transport::Connection;

/// The keys of one read-write lock, in Redisson's `RReadWriteLock` layout, plus
/// the set of waiting writers that keeps readers from starving them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RwKeys {
    /// The lock hash: `PREFIX + NAME` (field `mode`, then holders).
    pub(crate) key: String,
    /// Where releases publish `0`: `redisson_rwlock:{KEY}`.
    pub(crate) channel: String,
    /// The fencing counter, shared with the other locks of this name.
    pub(crate) token: String,
    /// Waiting writers and until when their claim holds: `redlatch_rwlock_writers:{KEY}`.
    pub(crate) writers: String,
    /// What every per-read-hold timeout key starts with: `{KEY}`.
    pub(crate) timeout_base: String,
    /// The lock hash's keys with the read-write channel: its name and
    /// which fencing counter `token` is.
    lock: LockKeys,
}

impl RwKeys {
    pub(crate) fn new(prefix: &str, name: &str) -> Result<RwKeys> {
        Ok(RwKeys::of_lock(&LockKeys::new(prefix, name)?))
    }

    /// The read-write lock's keys of the lock hash `lock` (as
    /// [`RwKeys::as_lock_keys`] gave them, or as made for its name): the
    /// same key, name and fencing counter.
    pub(crate) fn of_lock(lock: &LockKeys) -> RwKeys {
        let lock = lock.clone().read_write();
        RwKeys {
            channel: prefix_name("redisson_rwlock", &lock.key),
            writers: prefix_name("redlatch_rwlock_writers", &lock.key),
            timeout_base: hash_tagged(&lock.key),
            token: lock.token(),
            key: lock.key.to_string(),
            lock,
        }
    }

    /// As [`LockKeys::per_name_counter`].
    pub(crate) fn per_name_counter(mut self, per_name: bool) -> RwKeys {
        if per_name {
            self.lock = self.lock.per_name_counter(true);
            self.token = self.lock.token();
        }
        self
    }

    /// As [`LockKeys`], for code shared with the other locks (guards, watchdog).
    pub(crate) fn as_lock_keys(&self) -> LockKeys {
        self.lock.clone()
    }
}

/// The read-hold timeout keys of the read field `field` on the lock hash
/// `key` start with this, then `:<n>` for the n-th hold:
/// `{KEY}:<field>:rwlock_timeout` (Redisson's layout).
pub(crate) fn read_timeout_prefix(key: &str, field: &str) -> String {
    format!("{}:rwlock_timeout", suffix_name(key, field))
}

/// The hash field of a write hold: Redisson's `<uuid>:<thread>:write`.
pub(crate) fn write_field(read_field: &str) -> String {
    format!("{read_field}:write")
}

impl RwKeys {
    /// As [`LockKeys::checked_for`], with the waiting writers and the read
    /// hold timeout keys (which all start with `timeout_base`).
    pub(crate) fn checked_for(mut self, conn: &Connection) -> Result<RwKeys> {
        self.lock = self.lock.checked_for(conn)?;
        self.token = self.lock.token();
        let others = [
            &*self.channel,
            &self.token,
            &self.writers,
            &self.timeout_base,
        ];
        one_slot(conn, &self.key, &others, LOCK_SPLIT)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::keys::slot;

    #[test]
    fn rw_keys_follow_redisson_layout() {
        let rw = RwKeys::new("", "doc").unwrap();
        assert_eq!(rw.channel, "redisson_rwlock:{doc}");
        assert_eq!(rw.writers, "redlatch_rwlock_writers:{doc}");
        assert_eq!(
            read_timeout_prefix(&rw.key, "u:1"),
            "{doc}:u:1:rwlock_timeout"
        );
        assert_eq!(write_field("u:1"), "u:1:write");
        // As the guards and the watchdog see it: the same hash and channel.
        let lock = rw.as_lock_keys();
        assert_eq!(&*lock.key, "doc");
        assert_eq!(lock.name(), "doc");
        assert_eq!(lock.channel(), rw.channel);
    }

    /// The counter follows the fence as the other locks' does.
    #[test]
    fn the_counter_name_follows_the_fence() {
        let rw = RwKeys::new("", "doc").unwrap();
        assert_eq!(rw.token, "redlatch_lock_token");
        let per_name = rw.per_name_counter(true);
        assert_eq!(per_name.token, "redisson_lock_token:{doc}");
        assert_eq!(per_name.as_lock_keys().token(), per_name.token);
    }

    #[test]
    fn plain_names_keep_their_keys_in_one_slot() {
        for name in ["order:42", "order:{42}"] {
            let rw = RwKeys::new("app:", name).unwrap();
            let home = slot(&rw.key);
            let timeout = format!("{}:1", read_timeout_prefix(&rw.key, "u:1"));
            for key in [&rw.channel, &rw.writers, &timeout] {
                assert_eq!(slot(key), home, "{key}");
            }
        }
    }
}

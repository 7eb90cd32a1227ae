//! A semaphore's keys and channel in Redisson's `RSemaphore` /
//! `RPermitExpirableSemaphore` layout, and how a permit id is stored.

use crate::base::keys::LockKeys;
use crate::error::Result;
use crate::scripts::keys::{one_slot, prefix_name, suffix_name};
use crate::transport::Connection;

const SEMAPHORE_SPLIT: &str = "on a Redis Cluster, braces in the name or key prefix would put the semaphore's keys in different hash slots";

/// The keys and channel of one semaphore, in Redisson's `RSemaphore` /
/// `RPermitExpirableSemaphore` layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SemaphoreKeys {
    /// The available permit count: `PREFIX + NAME`.
    pub(crate) key: String,
    /// Where releases publish the new count: `redisson_sc:{KEY}`.
    pub(crate) channel: String,
    /// Permit id → expiry, for expirable permits: `{KEY}:timeout` (Redisson's `suffixName`).
    pub(crate) timeouts: String,
}

impl SemaphoreKeys {
    /// Builds the keys for `name` under `prefix`; the name rules are the locks'.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<SemaphoreKeys> {
        let key = LockKeys::new(prefix, name)?.key;
        Ok(SemaphoreKeys {
            channel: prefix_name("redisson_sc", &key),
            timeouts: suffix_name(&key, "timeout"),
            key: key.to_string(),
        })
    }
}

impl SemaphoreKeys {
    /// As [`LockKeys::checked_for`]: the count, channel and expiries must
    /// share one slot on a Redis Cluster.
    pub(crate) fn checked_for(self, conn: &Connection) -> Result<SemaphoreKeys> {
        one_slot(
            conn,
            &self.key,
            &[&self.channel, &self.timeouts],
            SEMAPHORE_SPLIT,
        )?;
        Ok(self)
    }
}

/// The member a permit id is stored as in a permit-expirable semaphore's
/// expiries: its 16 bytes, raw, as Redisson stores its permit ids (which it
/// shows as 32 hex digits, as redlatch does). An id that is not 32 hex
/// digits (never made by redlatch) is sent as it is.
pub(crate) fn permit_member(id: &str) -> Vec<u8> {
    match uuid::Uuid::try_parse(id) {
        Ok(raw) if id.len() == 32 => raw.as_bytes().to_vec(),
        _ => id.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::keys::slot;

    #[test]
    fn semaphore_keys_follow_redisson_layout() {
        let keys = SemaphoreKeys::new("app:", "pool").unwrap();
        assert_eq!(keys.key, "app:pool");
        assert_eq!(keys.channel, "redisson_sc:{app:pool}");
        assert_eq!(keys.timeouts, "{app:pool}:timeout");
        assert!(SemaphoreKeys::new("", "").is_err());
    }

    #[test]
    fn a_semaphores_keys_share_its_slot() {
        for name in ["order:42", "order:{42}"] {
            let semaphore = SemaphoreKeys::new("app:", name).unwrap();
            let home = slot(&semaphore.key);
            assert_eq!(slot(&semaphore.channel), home);
            assert_eq!(slot(&semaphore.timeouts), home);
        }
    }

    #[test]
    fn permit_ids_are_stored_as_their_16_raw_bytes() {
        let member = permit_member("00ff10a0000000000000000000000001");
        assert_eq!(member.len(), 16);
        assert_eq!(&member[..4], &[0x00, 0xff, 0x10, 0xa0]);
        assert_eq!(member[15], 1);
        assert_eq!(permit_member("not-hex"), b"not-hex");
    }
}

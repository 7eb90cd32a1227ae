//! The count-down latch's key and channel, in Redisson's `RCountDownLatch` layout.

use crate::base::keys::LockKeys;
use crate::error::Result;
use crate::scripts::keys::one_slot;
use crate::transport::Connection;

/// The key and channel of one count-down latch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LatchKeys {
    /// The count: `PREFIX + NAME`, a string holding a decimal integer.
    pub(crate) key: String,
    /// Where the latch's changes are published:
    /// `redisson_countdownlatch__channel__{KEY}`. Redisson writes the braces
    /// whatever the key holds (not its `prefixName`), so a key with braces
    /// of its own keeps them inside.
    pub(crate) channel: String,
}

const LATCH_SPLIT: &str = "on a Redis Cluster, braces in the name or key prefix would put the latch's key and channel in different hash slots";

impl LatchKeys {
    /// Builds the keys for `name` under `prefix`; the name rules are the locks'.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<LatchKeys> {
        let key = LockKeys::new(prefix, name)?.key;
        Ok(LatchKeys {
            channel: format!("redisson_countdownlatch__channel__{{{key}}}"),
            key: key.to_string(),
        })
    }

    /// Refuses, on a Redis Cluster, a name whose channel would hash to
    /// another slot than its key (a name with braces of its own: the
    /// channel's hash tag then ends at the name's first `}`), as a Redisson
    /// client's call would fail there with CROSSSLOT.
    pub(crate) fn checked_for(self, conn: &Connection) -> Result<LatchKeys> {
        one_slot(conn, &self.key, &[&self.channel], LATCH_SPLIT)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::keys::slot;

    #[test]
    fn the_channel_wraps_the_whole_key_as_redisson_writes_it() {
        let keys = LatchKeys::new("app:", "ready").unwrap();
        assert_eq!(keys.key, "app:ready");
        assert_eq!(
            keys.channel,
            "redisson_countdownlatch__channel__{app:ready}"
        );
        assert_eq!(slot(&keys.key), slot(&keys.channel));
        let braced = LatchKeys::new("", "job{7}").unwrap();
        assert_eq!(braced.channel, "redisson_countdownlatch__channel__{job{7}}");
        assert_ne!(slot(&braced.key), slot(&braced.channel));
        assert!(LatchKeys::new("", "").is_err());
    }
}

//! How Redis key names are made and hashed, for every primitive: Redisson's
//! derived names (`prefix_name`, `suffix_name`), hash tags and cluster
//! slots (`slot`, `one_slot`, `slot_tag`), request record keys, and the
//! owner check. The key types themselves live with their primitives
//! (`base/keys.rs` for the lock hash every lock kind shares).

use crate::error::{Error, Result, excerpt};
use crate::settings::limits::MAX_OWNER_LEN;
use crate::transport::Connection;

/// Hash slots of a Redis Cluster.
pub(crate) const CLUSTER_SLOTS: u16 = 16384;

/// On a Redis Cluster, refuses `key` unless every one of `others` hashes to
/// its slot (a lock kind's `checked_for`); on other topologies, accepts it.
pub(crate) fn one_slot(
    conn: &Connection,
    key: &str,
    others: &[&str],
    reason: &'static str,
) -> Result<()> {
    if conn.is_cluster() {
        let home = slot(key);
        if others.iter().any(|other| slot(other) != home) {
            return Err(Error::InvalidName {
                name: excerpt(key),
                reason,
            });
        }
    }
    Ok(())
}

/// Redisson's `prefixName`: `PREFIX:{KEY}`, or `PREFIX:KEY` when the key
/// already holds a `{` (its own hash tag then places every derived name in
/// its slot). Every name derived from a lock's key goes through this or
/// [`suffix_name`], as Redisson's do, so both sides meet on the same names.
pub(crate) fn prefix_name(prefix: &str, key: &str) -> String {
    PrefixName { prefix, key }.to_string()
}

/// [`prefix_name`] unwritten: written straight into a request's buffer it
/// costs no allocation (the acquire sends two such names per lock).
#[derive(Clone, Copy)]
pub(crate) struct PrefixName<'a> {
    pub(crate) prefix: &'a str,
    pub(crate) key: &'a str,
}

impl std::fmt::Display for PrefixName<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "{}:{}", self.prefix, HashTagged(self.key))
    }
}

impl redis::ToRedisArgs for PrefixName<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        // Writing into memory cannot fail.
        let _ = write!(out.writer_for_next_arg(), "{self}");
    }
}

/// The smallest decimal number whose text hashes to `slot`: the tag of that
/// slot's shared fencing counter. The table (every slot has one below
/// 200,000) is built once, at the first use on a cluster.
pub(crate) fn slot_tag(slot: u16) -> u32 {
    static TAGS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; usize::from(CLUSTER_SLOTS)];
        let mut missing = tags.len();
        let mut text = String::new();
        for n in 0u32.. {
            use std::fmt::Write;
            text.clear();
            let _ = write!(text, "{n}");
            let at = usize::from(crc16_xmodem(text.as_bytes()) % CLUSTER_SLOTS);
            if tags[at] == u32::MAX {
                tags[at] = n;
                missing -= 1;
                if missing == 0 {
                    break;
                }
            }
        }
        tags
    });
    tags[usize::from(slot % CLUSTER_SLOTS)]
}

/// Redisson's `suffixName`: `{KEY}:SUFFIX`, or `KEY:SUFFIX` when the key
/// already holds a `{`.
pub(crate) fn suffix_name(key: &str, suffix: &str) -> String {
    format!("{}:{suffix}", HashTagged(key))
}

/// `{KEY}`, or the key itself when it already holds a `{`.
pub(crate) fn hash_tagged(key: &str) -> String {
    HashTagged(key).to_string()
}

/// [`hash_tagged`] unwritten: the one place the rule lives.
struct HashTagged<'a>(&'a str);

impl std::fmt::Display for HashTagged<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.contains('{') {
            out.write_str(self.0)
        } else {
            write!(out, "{{{}}}", self.0)
        }
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of its hash tag
/// (the text between the first `{` and the next `}`, when not empty), or of
/// the whole key, modulo 16384.
pub(crate) fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = bytes
        .iter()
        .position(|&byte| byte == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            let close = rest.iter().position(|&byte| byte == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16_xmodem(hashed) % CLUSTER_SLOTS
}

/// The hash tag Redis Cluster hashes `key` on: the text between the first
/// `{` and the next `}` when not empty, else `None` (the whole key counts).
pub(crate) fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// A fresh request record key in the slot of `key`:
/// `redlatch_request:{TAG}:<32 hex digits>`, TAG being the hash tag of
/// `key`, or `key` itself when it has none. A key without a tag of its own
/// but with a `}` in it cannot be wrapped that way; a short decimal tag of
/// the same slot stands in for it then.
pub(crate) fn request_record_key(key: &str) -> String {
    let id = uuid::Uuid::new_v4().simple();
    let tag = match hash_tag(key) {
        Some(tag) => tag.to_owned(),
        None if !key.contains('}') => key.to_owned(),
        None => slot_tag(slot(key)).to_string(),
    };
    format!("redlatch_request:{{{tag}}}:{id}")
}

fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Checks an owner name given by the caller.
pub(crate) fn validate_owner(owner: &str) -> Result<()> {
    if owner.is_empty() {
        return Err(Error::InvalidOwner {
            owner: String::new(),
            reason: "an owner must not be empty",
        });
    }
    if owner.starts_with('#') {
        return Err(Error::InvalidOwner {
            owner: excerpt(owner),
            reason: "owners starting with '#' are reserved for anonymous owners",
        });
    }
    if owner.len() > MAX_OWNER_LEN {
        return Err(Error::InvalidOwner {
            owner: excerpt(owner),
            reason: "longer than 256 bytes",
        });
    }
    // A read-write lock writes owner `X`'s write hold under the field of owner
    // `X:write`'s read hold: such an owner would read under another's write.
    if owner.ends_with(":write") {
        return Err(Error::InvalidOwner {
            owner: excerpt(owner),
            reason: "owners ending in ':write' are reserved for read-write locks' write holds",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_records_share_the_slot_of_the_key() {
        for key in [
            "plain", "a{tag}b", "{}x", "a{b", "a}b", "x{}y}z", "{a{b}c", "é{ü}", "{", "}",
        ] {
            let record = request_record_key(key);
            assert!(record.starts_with("redlatch_request:{"), "{record}");
            assert_eq!(slot(&record), slot(key), "{key} -> {record}");
        }
        assert_ne!(request_record_key("k"), request_record_key("k"));
    }

    #[test]
    fn slots_follow_redis_cluster_hashing() {
        // The reference value of the CRC16 variant Redis Cluster uses.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31c3);
        for key in [
            "order:42",
            "{user1}:a",
            "a{}b",
            "x{y",
            "redisson_lock__channel:{order:42}",
        ] {
            assert_eq!(
                redis::cluster_routing::Slot::new(slot(key)),
                Some(redis::cluster_routing::Slot::for_key(key)),
                "{key}"
            );
        }
        assert_eq!(slot("{user1}:a"), slot("user1"));
        assert_eq!(slot("a{}b"), slot("a{}b"));
    }

    #[test]
    fn owners_are_checked() {
        assert!(validate_owner("request-1").is_ok());
        assert!(matches!(
            validate_owner(""),
            Err(Error::InvalidOwner { .. })
        ));
        assert!(matches!(
            validate_owner("#1"),
            Err(Error::InvalidOwner { .. })
        ));
        assert!(matches!(
            validate_owner(&"o".repeat(MAX_OWNER_LEN + 1)),
            Err(Error::InvalidOwner { .. })
        ));
    }
}

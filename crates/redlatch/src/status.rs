//! A snapshot of one lock, as `Lock::status` reads it.

use std::time::Duration;

use redis::Value;

use crate::error::{Error, Result};

/// One owner holding the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The owner field: `<client-id>:<owner>` (Redisson writes `<uuid>:<thread-id>`).
    pub owner: String,
    /// How many times it holds the lock (re-entries included).
    pub count: u64,
}

/// What [`Lock::status`](crate::Lock::status) found, read atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The lock's name, without the key prefix.
    pub name: String,
    /// The Redis key (prefix included).
    pub key: String,
    /// True when some owner holds the lock.
    pub held: bool,
    /// The owners holding it (normally one) with their hold counts.
    pub holders: Vec<Holder>,
    /// Remaining lease; `None` when free or when the key has no expiry.
    pub ttl: Option<Duration>,
    /// The last fencing token handed out for this name; `None` if never acquired.
    pub last_token: Option<u64>,
    /// Client connections subscribed to the lock's channel: each process
    /// with at least one waiter on this lock counts once (Redisson clients too).
    pub waiting_clients: u64,
}

impl LockStatus {
    pub(crate) fn from_reply(name: &str, key: &str, reply: Value) -> Result<LockStatus> {
        let bad = |detail: &str| Error::Protocol {
            op: "status",
            detail: detail.to_owned(),
        };
        let Value::Array(items) = reply else {
            return Err(bad("not an array"));
        };
        let int = |value: &Value| -> Result<i64> {
            match value {
                Value::Int(number) => Ok(*number),
                Value::BulkString(bytes) => std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| bad("hold count is not a number")),
                _ => Err(bad("expected a number")),
            }
        };
        let text = |value: &Value| -> Result<String> {
            match value {
                Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
                _ => Err(bad("expected an owner")),
            }
        };
        if items.len() < 3 || items.len() % 2 == 0 {
            return Err(bad("wrong number of items"));
        }
        let kind = int(&items[0])?;
        if kind == -1 {
            return Err(Error::WrongType {
                key: key.to_owned(),
            });
        }
        let pttl = int(&items[1])?;
        let token = int(&items[2])?;
        let mut holders = Vec::new();
        for pair in items[3..].chunks(2) {
            // A hash whose values are not counts is some other data, not a lock.
            let count = int(&pair[1]).map_err(|_| Error::WrongType {
                key: key.to_owned(),
            })?;
            holders.push(Holder {
                owner: text(&pair[0])?,
                count: count.max(0) as u64,
            });
        }
        Ok(LockStatus {
            name: name.to_owned(),
            key: key.to_owned(),
            held: kind == 1,
            holders,
            ttl: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
            last_token: (token >= 0).then_some(token as u64),
            waiting_clients: 0,
        })
    }
}

/// True when a hash field looks like a lock owner: `<uuid>:<owner>`, as
/// redlatch and Redisson write them.
pub(crate) fn looks_like_owner(field: &str) -> bool {
    field.len() > 37 && field.as_bytes()[36] == b':' && uuid::Uuid::try_parse(&field[..36]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_are_recognised() {
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:57"));
        assert!(looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:#3"));
        assert!(!looks_like_owner("3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:"));
        assert!(!looks_like_owner("name"));
        assert!(!looks_like_owner("not-a-uuid-at-all-but-36-chars-long!:1"));
    }
}

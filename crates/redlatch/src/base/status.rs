//! A snapshot of one lock, as `Lock::status`, `FairLock::status` and
//! `TokenLock::status` read it.

use std::time::Duration;

use redis::Value;

#[cfg(feature = "holder-records")]
use crate::base::holder_identity::{self, HolderIdentity};
use crate::base::keys::{FairLine, LOCK_SPLIT, LockKeys};
use crate::base::scripts;
use crate::engine::context::Core;
use crate::error::{Error, Result};
#[cfg(feature = "holder-records")]
use crate::scripts::holder_keys;
use crate::scripts::keys::one_slot;
#[cfg(feature = "holder-records")]
use crate::transport::Connection;
use crate::transport::bounded;

/// One owner holding the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The owner field: `<client-id>:<owner>` (Redisson writes `<uuid>:<thread-id>`).
    pub owner: String,
    /// How many times it holds the lock (re-entries included).
    pub count: u64,
    /// Who the owner is (host, process, program, since when, purpose),
    /// where its client published it
    /// ([`ClientBuilder::holder_identity`](crate::ClientBuilder::holder_identity));
    /// `None` for a Redisson holder, a hold younger than about 50 ms, or a
    /// client that does not publish.
    #[cfg(feature = "holder-records")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holder-records")))]
    pub identity: Option<HolderIdentity>,
}

/// Which side of a [`ReadWriteLock`](crate::ReadWriteLock) is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Held by one or more readers (`mode` = `read` in the lock hash).
    Read,
    /// Held by a writer (`mode` = `write`); the writer may also hold reads.
    Write,
}

impl LockMode {
    /// `"read"` or `"write"`, as the lock hash spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Read => "read",
            LockMode::Write => "write",
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// What [`Lock::status`](crate::Lock::status) (or
/// [`FairLock::status`](crate::FairLock::status),
/// [`TokenLock::status`](crate::TokenLock::status)) found, read atomically.
///
/// The same name may be a plain or fair lock (one hash of owners) or a
/// read-write lock (the same hash with a `mode` field): `mode` tells them
/// apart. A token lock's status (a string holding its holder's token, as
/// any `SET key token NX PX lease` lock) has one holder, the token, count 1.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The lock's name, without the key prefix.
    pub name: String,
    /// The Redis key (prefix included).
    pub key: String,
    /// True when some owner holds the lock.
    pub held: bool,
    /// The owners holding it (normally one) with their hold counts. For a
    /// read-write lock: every reader, and the writer (its field ends in
    /// `:write`). For a token lock: the token its key holds, count 1.
    pub holders: Vec<Holder>,
    /// Remaining lease; `None` when free or when the key has no expiry.
    pub ttl: Option<Duration>,
    /// The fencing token of the current exclusive hold (plain or fair lock).
    /// For a free lock or a read-write lock, the last token handed out for
    /// this name when it has a counter of its own
    /// ([`Settings::per_name_token_counters`](crate::Settings::per_name_token_counters)),
    /// else `None`: the shared counter says nothing about one name.
    pub last_token: Option<u64>,
    /// Client connections subscribed to the lock's channel (for a
    /// read-write lock, its `redisson_rwlock` channel): each process with at
    /// least one waiter on this lock counts once (Redisson clients too).
    /// Fair-lock waiters listen on channels of their own: see `line`.
    pub waiting_clients: u64,
    /// `Some` for a held read-write lock: which side is held.
    pub mode: Option<LockMode>,
    /// The fair lock's waiting line, oldest first: owner fields whose place
    /// has not run out. Empty for other locks, or when nobody waits.
    pub line: Vec<String>,
}

/// The kind of key a status found under the lock's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// No key: the lock is free.
    Free,
    /// A hash: a plain, fair or read-write lock.
    Hash,
    /// A string: a token lock, or another library's `SET NX PX` lock.
    String,
}

impl LockStatus {
    pub(crate) fn from_reply(name: &str, key: &str, reply: Value) -> Result<(LockStatus, KeyKind)> {
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
        if items.len() < 5 || items.len() % 2 == 0 {
            return Err(bad("wrong number of items"));
        }
        let kind = match int(&items[0])? {
            0 => KeyKind::Free,
            1 => KeyKind::Hash,
            2 => KeyKind::String,
            _ => {
                return Err(Error::WrongType {
                    key: key.to_owned(),
                });
            }
        };
        let pttl = int(&items[1])?;
        let token = int(&items[2])?;
        let mode = match text(&items[3])?.as_str() {
            "" => None,
            "read" => Some(LockMode::Read),
            "write" => Some(LockMode::Write),
            // A `mode` field no read-write lock writes: some other data.
            _ => {
                return Err(Error::WrongType {
                    key: key.to_owned(),
                });
            }
        };
        let Value::Array(waiters) = &items[4] else {
            return Err(bad("the line is not an array"));
        };
        let line = waiters.iter().map(text).collect::<Result<Vec<_>>>()?;
        let mut holders = Vec::new();
        for pair in items[5..].chunks(2) {
            // A hash whose values are not counts is some other data, not a lock.
            let count = int(&pair[1]).map_err(|_| Error::WrongType {
                key: key.to_owned(),
            })?;
            holders.push(Holder {
                owner: text(&pair[0])?,
                count: count.max(0) as u64,
                #[cfg(feature = "holder-records")]
                identity: None,
            });
        }
        let status = LockStatus {
            name: name.to_owned(),
            key: key.to_owned(),
            held: kind != KeyKind::Free,
            holders,
            ttl: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
            last_token: (token >= 0).then_some(token as u64),
            waiting_clients: 0,
            mode,
            line,
        };
        Ok((status, kind))
    }
}

/// Reads the status of the lock `name` whatever its kind: one script (lock
/// hash, counter, fair line) so the parts agree, then one PUBSUB call for the
/// subscribers of the plain and read-write channels. Reads only. A string
/// (a token lock's key) is [`Error::WrongType`] here: the lock handles
/// whose key is a hash refuse it, as their other calls do.
pub(crate) async fn read(core: &Core, name: &str) -> Result<LockStatus> {
    match read_with_kind(core, name).await? {
        (status, KeyKind::String) => Err(Error::WrongType { key: status.key }),
        (status, _) => Ok(status),
    }
}

/// [`read`], whatever the key's type (a hash or a string), and which it
/// found: for `TokenLock::status` and `Client::locks`.
pub(crate) async fn read_with_kind(core: &Core, name: &str) -> Result<(LockStatus, KeyKind)> {
    let settings = core.current_settings();
    let lock = LockKeys::new(&settings.key_prefix, name)?
        .per_name_counter(settings.per_name_token_counters)
        .checked_for(&core.conn)?;
    // A fair lock's line, should the name be one's.
    let line = FairLine::of(&lock);
    one_slot(&core.conn, &lock.key, &line.keys(), LOCK_SPLIT)?;
    // The read-write lock's channel, in the slot `checked_for` just checked
    // for the lock's own channel (both wrap the key alike).
    let read_write_channel = lock.clone().read_write().channel();
    let mut conn = core.conn.clone();
    let call = async {
        let reply: Value = scripts::STATUS
            .key(&*lock.key)
            .key(lock.token())
            .key(&line.queue)
            .key(&line.timeouts)
            .key(&line.alive)
            .arg(if lock.counter_is_per_name() { "1" } else { "0" })
            .invoke_async(&mut conn)
            .await
            .map_err(|error| Error::from_redis("status", error))?;
        // Both channels share the lock's slot, so one call asks for both.
        let (_, plain, _, read_write): (String, u64, String, u64) = redis::cmd("PUBSUB")
            .arg(conn.numsub_command())
            .arg(lock.channel())
            .arg(&read_write_channel)
            .query_async(&mut conn)
            .await
            .map_err(|error| Error::from_redis("status", error))?;
        let (mut status, kind) = LockStatus::from_reply(name, &lock.key, reply)?;
        status.waiting_clients = if status.mode.is_some() {
            read_write
        } else {
            plain
        };
        #[cfg(feature = "holder-records")]
        name_holders(&mut conn, &settings.key_prefix, &mut status).await;
        Ok((status, kind))
    };
    bounded("status", settings.response_timeout, call).await
}

/// Fills in each holder's identity from its client's record (one `HMGET`
/// per holder). Names are a courtesy: a record that cannot be read (an ACL,
/// a cluster node down) leaves the holder unnamed.
#[cfg(feature = "holder-records")]
async fn name_holders(conn: &mut Connection, prefix: &str, status: &mut LockStatus) {
    for holder in &mut status.holders {
        let Some(client) = holder_keys::client_id(&holder.owner) else {
            continue;
        };
        let fields: redis::RedisResult<Vec<Option<String>>> = redis::cmd("HMGET")
            .arg(holder_keys::record_key(prefix, client))
            .arg(&["host", "pid", "program", "purpose"][..])
            .arg(holder_keys::hold_field(&status.key, &holder.owner))
            .query_async(conn)
            .await;
        holder.identity = fields
            .ok()
            .and_then(|fields| holder_identity::from_fields(&fields));
    }
}

//! Redis key names of one lock hash, in Redisson's layout: `LockKeys`,
//! shared by every lock kind (guards, requests, the watchdog's renewals),
//! and `FairLine`, the fair lock's line beside it, which the status of any
//! lock reads too.

use std::sync::Arc;

use crate::error::{Error, Result, excerpt};
use crate::scripts::keys::{PrefixName, one_slot, prefix_name, slot, slot_tag};
use crate::settings::limits::MAX_NAME_LEN;
use crate::transport::Connection;

/// The keys and channel that make up one lock.
///
/// Only the lock key is stored: a guard keeps its keys for as long as it
/// holds, and a client may hold many thousands of locks. The channel and the
/// fencing counter are derived from the key when a script call needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock hash: `PREFIX + NAME`, shared with the watchdog's record of
    /// each hold on it.
    pub(crate) key: Arc<str>,
    /// Where `NAME` starts in `key` (after the key prefix; a key is at
    /// most [`MAX_NAME_LEN`] bytes). Small: a guard keeps its keys inline.
    name_at: u16,
    /// Which channel the final release publishes on.
    channel: LockChannel,
    /// Which fencing counter hands out the lock's tokens.
    fence: Fence,
}

/// Everything of a [`LockKeys`] but its key: four bytes, which a guard
/// keeps beside the key its hold shares (a client may hold many thousands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyShape {
    name_at: u16,
    channel: LockChannel,
    fence: Fence,
}

/// Which fencing counter a lock takes its tokens from.
///
/// Tokens only need to grow per lock name, and a counter that only grows
/// gives that to every name that shares it: one counter per server (per
/// hash slot on a cluster, where a script may only touch one slot) leaves a
/// bounded set of keys without an expiry, where one counter per name left
/// one key per name ever locked (`docs/SAFETY.md`, "Fencing tokens").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fence {
    /// `redlatch_lock_token`: one counter for every lock of the server.
    Server,
    /// `redlatch_lock_token:{TAG}`, TAG a short decimal string of the
    /// lock key's hash slot: one counter per slot of a cluster.
    Slot,
    /// `redisson_lock_token:{KEY}`: one counter per name, shared with
    /// Redisson's `RFencedLock` (`Settings::per_name_token_counters`).
    PerName,
}

/// The channel a lock's final release publishes `0` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockChannel {
    /// `redisson_lock__channel:{KEY}`: the reentrant and fair locks.
    Lock,
    /// `redisson_rwlock:{KEY}`: the read-write lock.
    ReadWrite,
}

impl LockKeys {
    /// Builds the keys for `name` under `prefix`, refusing names no lock should have.
    ///
    /// The channel and counter wrap the key in `{...}` so that, on a Redis
    /// Cluster, they hash to the same slot as the key itself (when the key has
    /// no braces of its own), as Redisson's do.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<LockKeys> {
        LockKeys::made(prefix, name, None)
    }

    /// [`LockKeys::new`] for a handle's name: under no key prefix the key
    /// is the name, shared rather than written again (one allocation less
    /// for every handle that acquires, a parked waiter's among them).
    pub(crate) fn of_name(prefix: &str, name: &Arc<str>) -> Result<LockKeys> {
        LockKeys::made(prefix, name, prefix.is_empty().then_some(name))
    }

    /// [`LockKeys::new`], with `key` the key already written, if it is.
    fn made(prefix: &str, name: &str, written: Option<&Arc<str>>) -> Result<LockKeys> {
        if name.is_empty() {
            return Err(Error::InvalidName {
                name: String::new(),
                reason: "a lock name must not be empty",
            });
        }
        if prefix.len() + name.len() > MAX_NAME_LEN {
            return Err(Error::InvalidName {
                name: excerpt(name),
                reason: "longer than 1024 bytes (key prefix included)",
            });
        }
        let key = match written {
            Some(key) => key.clone(),
            None => Arc::from(format!("{prefix}{name}")),
        };
        Ok(LockKeys {
            key,
            // At most the key's length, checked above.
            name_at: u16::try_from(prefix.len()).unwrap_or(u16::MAX),
            channel: LockChannel::Lock,
            fence: Fence::Server,
        })
    }

    /// What these keys are besides the key, to make them again from it.
    pub(crate) fn shape(&self) -> KeyShape {
        KeyShape {
            name_at: self.name_at,
            channel: self.channel,
            fence: self.fence,
        }
    }

    /// The keys `shape` was taken from, whose key is `key`.
    pub(crate) fn of_shape(key: Arc<str>, shape: KeyShape) -> LockKeys {
        LockKeys {
            key,
            name_at: shape.name_at,
            channel: shape.channel,
            fence: shape.fence,
        }
    }

    /// The lock's name within `key` (without the key prefix), by `shape`.
    pub(crate) fn name_in(key: &str, shape: KeyShape) -> &str {
        key.get(usize::from(shape.name_at)..).unwrap_or_default()
    }

    /// Takes tokens from one counter per name (`per_name`, Redisson's
    /// `RFencedLock` layout) rather than the shared counter.
    /// [`LockKeys::checked_for`] picks the shared counter's slot on a cluster.
    pub(crate) fn per_name_counter(mut self, per_name: bool) -> LockKeys {
        if per_name {
            self.fence = Fence::PerName;
        }
        self
    }

    /// The lock's name, without the key prefix.
    pub(crate) fn name(&self) -> &str {
        self.key
            .get(usize::from(self.name_at)..)
            .unwrap_or_default()
    }

    /// Where the final release publishes `0`: `redisson_lock__channel:{KEY}`
    /// (`redisson_rwlock:{KEY}` for a read-write lock).
    pub(crate) fn channel(&self) -> String {
        self.channel_name().to_string()
    }

    /// [`LockKeys::channel`], unwritten (for a request's buffer).
    pub(crate) fn channel_name(&self) -> PrefixName<'_> {
        let prefix = match self.channel {
            LockChannel::Lock => "redisson_lock__channel",
            LockChannel::ReadWrite => "redisson_rwlock",
        };
        PrefixName {
            prefix,
            key: &self.key,
        }
    }

    /// The fencing counter ([`Fence`]): `redlatch_lock_token`,
    /// `redlatch_lock_token:{TAG}` on a cluster, or, per name,
    /// `redisson_lock_token:{KEY}`.
    pub(crate) fn token(&self) -> String {
        self.token_name().to_string()
    }

    /// [`LockKeys::token`], unwritten (for a request's buffer).
    pub(crate) fn token_name(&self) -> TokenName<'_> {
        match self.fence {
            Fence::Server => TokenName::Server,
            Fence::Slot => TokenName::Slot(slot_tag(slot(&self.key))),
            Fence::PerName => TokenName::PerName(PrefixName {
                prefix: "redisson_lock_token",
                key: &self.key,
            }),
        }
    }

    /// The same lock hash with the read-write lock's channel
    /// (`redisson_rwlock:{KEY}`): a read-write lock's keys as the guards
    /// and the watchdog see them.
    pub(crate) fn read_write(mut self) -> LockKeys {
        self.channel = LockChannel::ReadWrite;
        self
    }

    /// True when the counter is the lock's own (one per name): its value is
    /// then the lock's last token, which `status` reports for a free lock.
    pub(crate) fn counter_is_per_name(&self) -> bool {
        self.fence == Fence::PerName
    }

    /// A long waiter's claim to the lock's next turn:
    /// `redlatch_lock_precedence:{KEY}` (`scripts/lib/precedence.lua`).
    pub(crate) fn precedence(&self) -> String {
        self.precedence_name().to_string()
    }

    /// [`LockKeys::precedence`], unwritten (for a request's buffer).
    pub(crate) fn precedence_name(&self) -> PrefixName<'_> {
        PrefixName {
            prefix: "redlatch_lock_precedence",
            key: &self.key,
        }
    }
}

impl LockKeys {
    /// Refuses, on a Redis Cluster, a name whose keys and channel would not
    /// share one hash slot: a script may only touch keys of one slot.
    ///
    /// The channel and counter wrap the lock key in `{...}`, which makes them
    /// hash like the key as long as the key has no braces of its own. A name
    /// (or key prefix) with braces usually breaks that (`a{b}` puts the key
    /// in the slot of `b`, the channel in the slot of `a{b`), so it is refused
    /// rather than failing later with CROSSSLOT. On one server any name works.
    pub(crate) fn checked_for(mut self, conn: &Connection) -> Result<LockKeys> {
        // The derived names are built only where slots matter (every acquire
        // checks its keys).
        if conn.is_cluster() {
            if self.fence == Fence::Server {
                self.fence = Fence::Slot;
            }
            one_slot(
                conn,
                &self.key,
                &[&self.channel(), &self.token(), &self.precedence()],
                LOCK_SPLIT,
            )?;
        }
        Ok(self)
    }
}

/// Why a name whose keys would fall in different cluster slots is refused.
pub(crate) const LOCK_SPLIT: &str = "on a Redis Cluster, braces in the name or key prefix would put the lock's keys in different hash slots";

/// A fencing counter's name ([`LockKeys::token_name`]), unwritten.
#[derive(Clone, Copy)]
pub(crate) enum TokenName<'a> {
    /// `redlatch_lock_token`.
    Server,
    /// `redlatch_lock_token:{TAG}`, TAG the decimal number given.
    Slot(u32),
    /// `redisson_lock_token:{KEY}`.
    PerName(PrefixName<'a>),
}

/// The shared counter's name on one server and through Sentinel.
pub(crate) const SERVER_COUNTER: &str = "redlatch_lock_token";

impl std::fmt::Display for TokenName<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenName::Server => out.write_str(SERVER_COUNTER),
            TokenName::Slot(tag) => write!(out, "{SERVER_COUNTER}:{{{tag}}}"),
            TokenName::PerName(name) => name.fmt(out),
        }
    }
}

impl redis::ToRedisArgs for TokenName<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        // Writing into memory cannot fail.
        let _ = write!(out.writer_for_next_arg(), "{self}");
    }
}

/// The shared fencing counter of hash slot `slot` on a cluster:
/// `redlatch_lock_token:{TAG}` ([`slot_tag`]).
#[cfg(test)]
pub(crate) fn slot_counter(slot: u16) -> String {
    TokenName::Slot(slot_tag(slot)).to_string()
}

/// The fair lock's line beside a lock hash, in Redisson's `RFairLock`
/// layout: what the status of any lock reads (a name a handle uses as a
/// plain lock may be a fair lock's in another process). The fair lock's own
/// keys (`fair_lock/keys.rs`) are these, its terms and its waiters' channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FairLine {
    /// Waiters in arrival order: `redisson_lock_queue:{KEY}` (list of owner fields).
    pub(crate) queue: String,
    /// Each waiter's deadline, Redisson's arithmetic: `redisson_lock_timeout:{KEY}` (zset, ms).
    pub(crate) timeouts: String,
    /// redlatch waiters' signs of life: `redlatch_fair_alive:{KEY}` (zset, ms),
    /// where Redisson never looks.
    pub(crate) alive: String,
}

impl FairLine {
    /// The line beside the lock hash `lock`.
    pub(crate) fn of(lock: &LockKeys) -> FairLine {
        FairLine {
            queue: prefix_name("redisson_lock_queue", &lock.key),
            timeouts: prefix_name("redisson_lock_timeout", &lock.key),
            alive: prefix_name("redlatch_fair_alive", &lock.key),
        }
    }

    /// The line's keys, for a slot check.
    pub(crate) fn keys(&self) -> [&str; 3] {
        [&self.queue, &self.timeouts, &self.alive]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::limits::MAX_NAME_LEN;

    /// A derived name written into a request is the name Redisson derives.
    #[test]
    fn a_name_written_unformatted_is_the_derived_name() {
        use redis::ToRedisArgs;
        for key in ["orders", "app:order{42}", "x{", "{}"] {
            let keys = LockKeys::new("", key).unwrap();
            let token = keys.clone().per_name_counter(true);
            assert_eq!(
                token.token_name().to_redis_args(),
                vec![token.token().into_bytes()]
            );
            assert_eq!(token.token(), prefix_name("redisson_lock_token", key));
            for (name, derived) in [
                (keys.precedence_name(), keys.precedence()),
                (keys.channel_name(), keys.channel()),
            ] {
                assert_eq!(name.to_redis_args(), vec![derived.clone().into_bytes()]);
                assert_eq!(derived, prefix_name(name.prefix, key));
            }
        }
        let per_name = |key| LockKeys::new("", key).unwrap().per_name_counter(true);
        assert_eq!(per_name("orders").token(), "redisson_lock_token:{orders}");
        assert_eq!(
            per_name("order{42}").token(),
            "redisson_lock_token:order{42}"
        );
    }

    /// Every slot has a counter tag, the tag lands in its slot, and it is
    /// the smallest decimal number that does.
    #[test]
    fn every_slot_has_a_shared_counter_in_that_slot() {
        let mut most = 0;
        for at in 0..crate::scripts::keys::CLUSTER_SLOTS {
            let tag = slot_tag(at);
            most = most.max(tag);
            assert_eq!(slot(&slot_counter(at)), at, "{tag}");
            assert_eq!(slot(&tag.to_string()), at);
            if tag > 0 {
                assert_ne!(slot(&(tag - 1).to_string()), at);
            }
        }
        assert!(most < 200_000, "{most}");
        assert_eq!(slot_counter(slot("0")), "redlatch_lock_token:{0}");
    }

    /// The counter's name follows the fence: shared per server, per slot on
    /// a cluster (the lock's slot), or Redisson's per-name counter.
    #[test]
    fn the_counter_name_follows_the_fence() {
        let keys = LockKeys::new("app:", "order:42").unwrap();
        assert_eq!(keys.token(), "redlatch_lock_token");
        let per_name = keys.clone().per_name_counter(true);
        assert_eq!(per_name.token(), "redisson_lock_token:{app:order:42}");
        let mut sharded = keys.clone();
        sharded.fence = Fence::Slot;
        assert_eq!(slot(&sharded.token()), slot(&keys.key));
        assert!(sharded.token().starts_with("redlatch_lock_token:{"));
    }

    #[test]
    fn keys_follow_redisson_layout() {
        let keys = LockKeys::new("app:", "order:42").unwrap();
        assert_eq!(&*keys.key, "app:order:42");
        assert_eq!(keys.channel(), "redisson_lock__channel:{app:order:42}");
        assert_eq!(
            keys.clone().read_write().channel(),
            "redisson_rwlock:{app:order:42}"
        );
        assert_eq!(
            keys.per_name_counter(true).token(),
            "redisson_lock_token:{app:order:42}"
        );
    }

    #[test]
    fn empty_and_oversized_names_are_refused() {
        assert!(matches!(
            LockKeys::new("", ""),
            Err(Error::InvalidName { .. })
        ));
        let long = "x".repeat(MAX_NAME_LEN);
        assert!(LockKeys::new("", &long).is_ok());
        assert!(matches!(
            LockKeys::new("p", &long),
            Err(Error::InvalidName { .. })
        ));
    }

    #[test]
    fn plain_names_keep_their_keys_in_one_slot() {
        // Names with a hash tag of their own keep it in every derived name
        // (Redisson's rule), so they stay in one slot too.
        for name in [
            "order:42",
            "voucher:7:user:42",
            "order:{42}",
            "{tenant}:job",
        ] {
            let keys = LockKeys::new("app:", name).unwrap();
            let home = slot(&keys.key);
            assert_eq!(slot(&keys.channel()), home, "{name}");
            let per_name = keys.per_name_counter(true);
            assert_eq!(slot(&per_name.token()), home, "{name}");
        }
        // The fair lock's line too.
        for name in ["order:42", "order:{42}"] {
            let lock = LockKeys::new("app:", name).unwrap();
            let home = slot(&lock.key);
            for key in FairLine::of(&lock).keys() {
                assert_eq!(slot(key), home, "{key}");
            }
        }
        // A `{` without a tag after it (or a lone `}`): the key hashes whole,
        // a derived name does not; a cluster refuses such names.
        for name in ["x{", "}x", "a{}b"] {
            let keys = LockKeys::new("", name).unwrap();
            assert_ne!(slot(&keys.channel()), slot(&keys.key), "{name}");
        }
    }

    #[test]
    fn the_fair_line_follows_redisson_layout() {
        let line = FairLine::of(&LockKeys::new("", "jobs").unwrap());
        assert_eq!(line.queue, "redisson_lock_queue:{jobs}");
        assert_eq!(line.timeouts, "redisson_lock_timeout:{jobs}");
        assert_eq!(line.alive, "redlatch_fair_alive:{jobs}");
    }
}

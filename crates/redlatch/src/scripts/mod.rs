//! The Lua scripts, each loaded from its primitive's folder
//! (`src/lock/acquire.lua`, `src/fair_lock/fair_acquire.lua`, ...; the ones
//! every lock shares in `src/base/`), the shared parts they carry in front
//! (`src/scripts/lib/*.lua`), and the typed calls that run them.
//!
//! They run as functions of redlatch's library where the server has
//! functions ([`library`]: FCALL, the library loaded again if the server lost
//! it), and by EVALSHA elsewhere, the script loaded when the server answers
//! NOSCRIPT (after a restart or `SCRIPT FLUSH`). Every
//! script that publishes takes the publish command last (`publish`, or
//! `spublish` on a Redis Cluster).
//!
//! On a Redis Cluster every script below except `RENEW`, `RAISE_TOKEN`,
//! `STATUS`, `PRECEDENCE_LEAVE`, `RW_READ_RENEW`, `SEMAPHORE_AVAILABLE`, `PERMIT_AVAILABLE`,
//! `PERMIT_RENEW`, `LATCH_COUNT` and `DEADLOCK_CHECK` takes one more KEY and one more ARGV, both last: the
//! request record and how long to keep it (see below).
//!
//! | script | KEYS | ARGV | returns |
//! |---|---|---|---|
//! | `ACQUIRE` | lock hash, counter, precedence claim per lock | lease ms, owner field, ms waited (0: no claim) per lock; claim ms, come-now ms | per lock: `{1,token}` fresh, `{2,token}` re-entered, `{0,pttl}` held (or free, and another waiter's claim stands), `{3,pttl}` held, and this owner's claim to the next turn stands, `{-1,0}` a value it cannot use (wrong type, hold count not an integer, counter not a non-negative 64-bit integer), `{-5,message}` refused by the server (ACL); nothing written for `-1`, `-5` |
//! | `REENTER` | lock hash | lease ms, owner field | hold count, 0 not held, -1 wrong type or hold count not an integer |
//! | `RELEASE` | lock hash per lock | channel, lease ms, owner field per lock; publish | per lock: `{1,n}` unlocked (n receivers), `{0,0}` one hold fewer, `{-1,0}` not held, `{-2,0}` wrong type (nothing written) or hold count not an integer (the field removed), `{-5,message}` refused by the server |
//! | `RENEW` | lock hash per entry | owner field, lease ms per entry | 1 or 0 per entry |
//! | `PRECEDENCE_LEAVE` | precedence claim | owner field | 1 withdrawn, 0 not this owner's |
//! | `FORCE_UNLOCK` | lock hash, counter | channel, publish | `{1,token}` deleted (token: the counter then, -1 unreadable), `{0,0}` free, `{-1,0}` wrong type |
//! | `RAISE_TOKEN` | lock hash, counter | owner field, token | 1 raised, 0 not held |
//! | `STATUS` | lock hash, counter, line?, deadlines?, signs of life? | — | `{kind, pttl, token, mode, line, field, count, ...}` |
//! | `FAIR_ACQUIRE` | lock hash, line, deadlines, counter, signs of life | lease ms, owner field, wait ms, place ms, waiter channel prefix, publish | `{1,token}`, `{2,token}`, `{0,pttl,first}`, `{-1,0,0}` a value it cannot use (as `ACQUIRE`) |
//! | `FAIR_RELEASE` | lock hash, line, deadlines, signs of life | waiter channel prefix, lease ms, owner field, publish | as `RELEASE` (one lock, no `-5`) |
//! | `FAIR_LEAVE` | lock hash, line, deadlines, signs of life | waiter channel prefix, owner field, publish, wait ms | 1 left, 0 not in line |
//! | `RW_READ_ACQUIRE` | lock hash, counter, waiting writers | lease ms, read field, write field, timeout prefix, re-enter only | `{1,token}`, `{2,token}`, `{0,wait}`, `{-1,0}` a value it cannot use (as `ACQUIRE`), `{-3,0}` not reading |
//! | `RW_WRITE_ACQUIRE` | lock hash, counter, waiting writers | lease ms, write field, claim ms, re-enter only, read field | `{1,token}`, `{2,token}`, `{0,pttl}`, `{-1,0}`, `{-3,0}` not writing, `{-4,0}` would deadlock |
//! | `RW_READ_RELEASE` | lock hash | channel, read field, timeout prefix, timeout base, publish | as `RELEASE` (one lock, no `-5`) |
//! | `RW_WRITE_RELEASE` | lock hash | channel, lease ms, write field, publish | as `RELEASE` (one lock, no `-5`) |
//! | `RW_WRITER_LEAVE` | waiting writers | channel, write field, publish | 1 withdrawn, 0 no claim |
//! | `RW_READ_RENEW` | lock hash per entry | read field, lease ms, timeout prefix per entry | 1 or 0 per entry |
//! | `SEMAPHORE_TRY_SET` | permit count | channel, permits, publish | 1 set, 0 already set, -1 wrong value |
//! | `SEMAPHORE_ADD` | permit count | channel, delta, publish | `{1,count}`, `{0,count}` refused, `{-1,0}` wrong value |
//! | `SEMAPHORE_ACQUIRE` | permit count | permits | `{1,left}`, `{0,available}`, `{-1,0}` wrong value |
//! | `SEMAPHORE_RELEASE` | permit count | channel, permits, publish | new count, -1 wrong value |
//! | `SEMAPHORE_AVAILABLE` | permit count | — | `{1,count}` (may be negative), `{-1,0}` wrong value |
//! | `PERMIT_ACQUIRE` | permit count, expiries | channel, permit id, lease ms, publish | `{1,left}`, `{0,wait}`, `{-1,0}` wrong type |
//! | `PERMIT_RELEASE` | permit count, expiries | channel, permit id, publish | 1 released, 2 released after its lease, 0 unknown, -1 wrong type |
//! | `PERMIT_AVAILABLE` | permit count, expiries | channel, publish | `{1,count,held}` (count may be negative), `{-1,0,0}` wrong type |
//! | `PERMIT_RENEW` | expiries per entry | permit id, lease ms per entry | 1 or 0 per entry |
//! | `LATCH_TRY_SET` | count | channel, count, publish | 1 set, 0 already set, -1 wrong value |
//! | `LATCH_COUNT_DOWN` | count | channel, publish | `{1,left}` (left a decimal string), `{-1,''}` wrong value |
//! | `LATCH_COUNT` | count | — | `{1,count}` (a decimal string, may be negative), `{-1,''}` wrong value |
//! | `LATCH_DELETE` | count | channel, publish | 1 deleted, 0 none, -1 wrong value |
//! | `DEADLOCK_CHECK` | lock waited for, the waiter's wait-for edge | edge ms, max depth, edge key prefix, cluster | `{}` no cycle (the edge written), or the cycle `{lock, holder, party, ...}` (the edge deleted) |
//!
//! Each `.lua` file opens with the full description of its keys, arguments
//! and replies.
//!
//! The lock scripts and the semaphores' acquires are loaded with
//! `src/scripts/lib/checks.lua` in front: the checks that let them refuse a
//! corrupt counter or count before writing. **One lock's fault is its
//! own**: in a call of `ACQUIRE` or `RELEASE` carrying several locks, an
//! error that belongs to one lock (its data, its type, an ACL refusal of
//! its keys) is that lock's outcome alone (`-1`/`-2`, `-5`), nothing is
//! written for it, and the others get their own outcomes. An error of the
//! server itself (READONLY, OOM, BUSY) still ends the whole call. Redis
//! checks a script's KEYS against the user's ACL before running it, so a
//! forbidden name refuses the whole call before anything runs; the
//! library then sends each lock of that batch alone (`lock/calls.rs`, `acquire_many`).
//!
//! **A lease already set is never shortened** (`src/scripts/lib/lease.lua`):
//! every script that sets the lease of a hold that exists already (a
//! re-entry, a renewal, a release that leaves holds) sets it only when the
//! key's PTTL is below the lease (a key with no expiry gets it too); only a
//! fresh acquisition sets it outright. A request sent later can run before
//! one sent earlier (after a lost script cache, redis-rs loads the script
//! and sends it again), and this keeps the key's expiry at or after
//! `sent_at + lease` of every request that ran, in any order.
//!
//! ## Re-send-safe on a Redis Cluster
//!
//! The cluster client of redis-rs sends a command again when its connection
//! drops while the command is in flight, and the library itself sends a
//! request again to learn its outcome; a script that changes data would
//! then run twice. So on a cluster every script that changes data (all but
//! `RENEW`, `RW_READ_RENEW`, `PERMIT_RENEW`, `RAISE_TOKEN`, `STATUS`, `PRECEDENCE_LEAVE`,
//! `SEMAPHORE_AVAILABLE`, `PERMIT_AVAILABLE`, `LATCH_COUNT`, `DEADLOCK_CHECK`, which can run twice
//! harmlessly) runs in a wrapped form generated from the same source
//! ([`Mutating`]), which takes **one more KEY, last**: a request record
//! `redlatch_request:{TAG}:<32 hex>` in the slot of KEYS[1], fresh for each
//! request and the same for its re-sends, and **one more ARGV, last**: how
//! long to keep the record, in ms. The wrapper removes both before the body
//! runs, so the body sees the KEYS and ARGV of the table above. A request
//! whose record exists returns the recorded reply and changes nothing;
//! otherwise the body runs and its reply (unless an error) is recorded with
//! `SET ... PX` (not when a server out of memory refuses it: see [`resendable`]). On one server and under Sentinel nothing re-sends, and the
//! plain scripts run.

pub(crate) mod acquired;
pub(crate) mod arg_list;
pub(crate) mod holder_keys;
pub(crate) mod keys;
pub(crate) mod library;
pub(crate) mod library_source;
pub(crate) mod lua;
pub(crate) mod released;

use std::sync::LazyLock;
use std::time::Duration;

use redis::{FromRedisValue, ToRedisArgs};

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::transport::{Connection, bounded};

pub(crate) use lua::{Invocation, Lua};

/// Function flags of scripts that only give back, extend or read: they must
/// run even when the server is out of memory, as their EVALSHA forms do
/// (where a write that takes no memory would be refused as a script's
/// first, `src/scripts/lib/memory.lua` lets it through).
pub(crate) const GIVES_BACK: &[&str] = &["allow-oom"];

/// Function flags of every acquire and re-entry (and of a semaphore's
/// count set or changed): run under OOM too, so that a busy primitive
/// answers "busy" (and a re-entry of a lock not held "not held") as their
/// EVALSHA forms do, where a function without the flag is refused
/// outright. A write they then make (a free lock's hold, one more hold, a
/// permit taken, a count set) is let past `maxmemory`, as a release's is;
/// by EVALSHA the server refuses it with OOM unless the script wrote
/// something before (docs/SAFETY.md, "Redis out of memory", says which).
pub(crate) const ANSWERS_UNDER_OOM: &[&str] = &["allow-oom"];

/// The file's name without its folder and `.lua`: the script's name in the
/// function library (a script that moves to another folder keeps its name,
/// and the library its content).
pub(crate) fn file_stem(file: &str) -> String {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.trim_end_matches(".lua").to_owned()
}

/// A script that only reads, or that can run twice harmlessly, declared in
/// its primitive's folder: `script!(NAME, "folder/file.lua", FLAGS, parts...)`
/// reads `crates/redlatch/src/folder/file.lua` (the path is relative to
/// `src/`, the file beside the declaration), with the shared parts named
/// after it (`src/scripts/lib/PART.lua`) in front, as for [`mutating!`].
macro_rules! script {
    ($name:ident, $file:literal, $flags:expr $(, $lib:ident)*) => {
        pub(crate) static $name: std::sync::LazyLock<$crate::scripts::Lua> =
            std::sync::LazyLock::new(|| {
                $crate::scripts::Lua::new(
                    $crate::scripts::file_stem($file),
                    concat!("", $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/lib/", stringify!($lib), ".lua")),)*),
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/", $file)).to_owned(),
                    $flags,
                )
            });
    };
}
pub(crate) use script;

/// A script that changes data, in its plain and re-send-safe forms,
/// declared in its primitive's folder: `mutating!(NAME, "folder/file.lua",
/// FLAGS, parts...)`, the path relative to `src/` as for [`script!`]. The
/// shared parts named after the file (`src/scripts/lib/NAME.lua`:
/// `checks`, the validity checks; `fair_line`, the fair lock's line;
/// `lease`, the rule that never shortens a lease; `memory`, what a write
/// does on a server out of memory; `set_once`, a count's first value) come
/// first.
macro_rules! mutating {
    ($name:ident, $file:literal, $flags:expr $(, $lib:ident)*) => {
        pub(crate) static $name: std::sync::LazyLock<$crate::scripts::Mutating> =
            std::sync::LazyLock::new(|| {
                $crate::scripts::Mutating::new(
                    $crate::scripts::file_stem($file),
                    concat!("", $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts/lib/", stringify!($lib), ".lua")),)*),
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/", $file)),
                    $flags,
                )
            });
    };
}
pub(crate) use mutating;

/// The scripts of one primitive, declared with [`script!`] and
/// [`mutating!`] in its own folder: what it adds to the function library.
/// A primitive registers it with one line in `crate::primitives`.
pub(crate) struct ScriptList {
    /// Scripts that change data, each loaded in both its forms.
    pub(crate) mutating: &'static [&'static LazyLock<Mutating>],
    /// Scripts that only read, or that can run twice harmlessly.
    pub(crate) plain: &'static [&'static LazyLock<Lua>],
}

impl ScriptList {
    /// Every script of the list, each form once.
    pub(crate) fn scripts(&self) -> impl Iterator<Item = &'static Lua> + use<> {
        let (mutating, plain) = (self.mutating, self.plain);
        mutating
            .iter()
            .flat_map(|script| {
                let script: &'static Mutating = script;
                [&script.plain, &script.resendable]
            })
            .chain(plain.iter().map(|script| {
                let script: &'static Lua = script;
                script
            }))
    }

    /// The plain sources of the scripts that change data (their bodies,
    /// without the shared parts), as the re-send-safe wrapper takes them.
    #[cfg(test)]
    pub(crate) fn mutating_bodies(&self) -> impl Iterator<Item = &'static str> + use<> {
        self.mutating.iter().map(|script| {
            let script: &'static Mutating = script;
            script.plain.body.as_str()
        })
    }
}

/// The shortest time a request record is kept.
const MIN_RECORD_KEEP: Duration = Duration::from_secs(5);

/// A script that changes data: the plain form, and the re-send-safe form
/// generated from the same source (see the module docs).
pub(crate) struct Mutating {
    plain: Lua,
    resendable: Lua,
}

impl Mutating {
    pub(crate) fn new(
        name: String,
        parts: &'static str,
        body: &'static str,
        flags: &'static [&'static str],
    ) -> Mutating {
        Mutating {
            resendable: Lua::new(format!("{name}_resendable"), parts, resendable(body), flags),
            plain: Lua::new(name, parts, body.to_owned(), flags),
        }
    }

    /// The plain form's whole source (shared parts in front).
    pub(crate) fn plain_source(&self) -> &str {
        &self.plain.source
    }

    /// The form to put in a pipeline on `conn` for a request whose first
    /// key is `first_key`: on a cluster the re-send-safe form, with the
    /// record key and its lifetime (ms) to pass last among KEYS and ARGV.
    /// Nothing sends it again but redis-rs.
    pub(crate) fn pipelined(&'static self, conn: &Connection, first_key: &str) -> Pipelined {
        match conn.resend_policy() {
            Some(settings) => Pipelined {
                script: &self.resendable,
                record: Some((
                    keys::request_record_key(first_key),
                    record_keep(&settings).as_millis() as u64,
                )),
            },
            None => Pipelined {
                script: &self.plain,
                record: None,
            },
        }
    }

    /// Starts one request on `conn`: re-send-safe on a cluster, plain elsewhere.
    pub(crate) fn call(&'static self, conn: &Connection) -> Call {
        let settings = conn.resend_policy();
        let script = if settings.is_some() {
            &self.resendable
        } else {
            &self.plain
        };
        Call {
            invocation: script.prepare_invoke(),
            record: None,
            settings,
        }
    }
}

/// A [`Mutating`] script's form for a pipeline.
pub(crate) struct Pipelined {
    pub(crate) script: &'static Lua,
    /// The request record key and how long to keep it (ms), on a cluster.
    pub(crate) record: Option<(String, u64)>,
}

/// `source` wrapped so that a request sent twice runs once: the request
/// record (last KEY) and its lifetime (last ARGV) are taken off KEYS and
/// ARGV, a recorded reply is returned as it is, and otherwise the body runs
/// (in a function, so its `return`s work) and a reply that is not an error
/// is recorded. `cmsgpack` keeps integers exact and nested replies as they are.
/// A server out of memory refuses the record only as an EVAL script's first
/// write, when the body wrote nothing (a busy lock): the reply goes back
/// unrecorded, and a re-send that runs the body again changes nothing either.
fn resendable(source: &str) -> String {
    format!(
        "local redlatch_record = table.remove(KEYS)\n\
         local redlatch_keep_ms = table.remove(ARGV)\n\
         local redlatch_seen = redis.call('get', redlatch_record)\n\
         if redlatch_seen then return cmsgpack.unpack(redlatch_seen) end\n\
         local function redlatch_body()\n\
         {source}\n\
         end\n\
         local redlatch_reply = redlatch_body()\n\
         if type(redlatch_reply) == 'table' and redlatch_reply.err then return redlatch_reply end\n\
         local redlatch_kept = redis.pcall('set', redlatch_record, cmsgpack.pack(redlatch_reply), 'px', redlatch_keep_ms)\n\
         if type(redlatch_kept) == 'table' and redlatch_kept.err and not string.find(redlatch_kept.err, '^OOM') then error(redlatch_kept) end\n\
         return redlatch_reply\n"
    )
}

/// How long a request record is kept: long enough to outlive every re-send
/// of its request (redis-rs's and ours, each up to the response timeout and
/// a retry delay apart), twice over; at least [`MIN_RECORD_KEEP`].
pub(crate) fn record_keep(settings: &Settings) -> Duration {
    let one_send = settings
        .response_timeout
        .saturating_add(settings.retry.max_delay);
    one_send
        .saturating_mul(settings.retry.attempts.saturating_add(1))
        .saturating_mul(2)
        .max(MIN_RECORD_KEEP)
}

/// One request of a [`Mutating`] script: its keys and arguments, and on a
/// cluster its request record, kept across re-sends.
pub(crate) struct Call {
    invocation: Invocation,
    /// The record key once the first key is known (cluster only).
    record: Option<String>,
    /// The settings re-sends follow (cluster only).
    settings: Option<std::sync::Arc<Settings>>,
}

impl Call {
    /// Adds a key; the first one decides the record's slot.
    pub(crate) fn key(&mut self, key: &str) -> &mut Call {
        if self.settings.is_some() && self.record.is_none() {
            self.record = Some(keys::request_record_key(key));
        }
        self.invocation.key(key);
        self
    }

    /// Adds a key after the first (which must come by [`Call::key`]: it
    /// decides the record's slot), written straight into the request.
    pub(crate) fn later_key<T: ToRedisArgs>(&mut self, key: T) -> &mut Call {
        debug_assert!(self.settings.is_none() || self.record.is_some());
        self.invocation.key(key);
        self
    }

    /// Adds an argument.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Call {
        self.invocation.arg(arg);
        self
    }

    /// Sends the request, each send bounded by `limit`. On a cluster a send
    /// that fails on the way (dropped connection, timeout, a server that
    /// cannot serve for now) is sent again, the same request, up to the
    /// retry policy's attempts (at least once), after its delays: the reply
    /// recorded by the run that took effect comes back, and nothing runs
    /// twice. The error returned says whether the request may have run
    /// ([`Error::may_have_run`]).
    pub(crate) async fn run<T: FromRedisValue>(
        mut self,
        conn: &mut Connection,
        op: &'static str,
        limit: Duration,
    ) -> Result<T> {
        let (Some(settings), Some(record)) = (self.settings.take(), self.record.take()) else {
            return send(&self.invocation, conn, op, limit).await;
        };
        self.invocation
            .key(record)
            .arg(record_keep(&settings).as_millis() as u64);
        let resends = settings.retry.attempts.max(1);
        // The first failed send that may have run: once one may have, the
        // outcome stays unknown whatever later sends fail with.
        let mut unknown: Option<Error> = None;
        let mut resent = 0;
        loop {
            let error = match send(&self.invocation, conn, op, limit).await {
                Err(error) if error.is_transient() => error,
                done => return done,
            };
            let error = match unknown.take() {
                Some(earlier) => earlier,
                None => error,
            };
            if resent >= resends {
                return Err(error);
            }
            tracing::debug!(%error, resent, "redlatch: a request failed on the way; sending it again");
            if error.may_have_run() {
                unknown = Some(error);
            }
            tokio::time::sleep(settings.retry.delay(resent)).await;
            resent += 1;
        }
    }
}

async fn send<T: FromRedisValue>(
    invocation: &Invocation,
    conn: &mut Connection,
    op: &'static str,
    limit: Duration,
) -> Result<T> {
    let call = async {
        invocation
            .invoke_async(conn)
            .await
            .map_err(|error| Error::from_redis(op, error))
    };
    bounded(op, limit, call).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_bodies_see_only_their_own_arguments() {
        // The wrapper takes its own KEY and ARGV off the ends before the
        // body runs, so bodies that count theirs (acquire and release take
        // several locks per call) see only their own (every primitive's
        // bodies open without a shebang: `crate::primitives`' tests).
        let wrapped = resendable("return #KEYS");
        let trimmed = wrapped.find("table.remove(KEYS)").unwrap();
        assert!(trimmed < wrapped.find("return #KEYS").unwrap());
    }

    #[test]
    fn a_script_is_named_after_its_file_not_its_folder() {
        // The folder is where the file lives, not part of the function's
        // name: moving a file keeps the library's names and content.
        assert_eq!(file_stem("lock/acquire.lua"), "acquire");
        assert_eq!(file_stem("count_down_latch/latch_count.lua"), "latch_count");
        assert_eq!(file_stem("status.lua"), "status");
    }

    #[test]
    fn records_outlive_every_resend() {
        let settings = Settings::default();
        let one = settings.response_timeout + settings.retry.max_delay;
        let keep = record_keep(&settings);
        assert!(keep >= one * (settings.retry.attempts + 1));
        assert!(keep >= MIN_RECORD_KEEP);
    }
}

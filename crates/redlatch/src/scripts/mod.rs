//! The Lua scripts, loaded from `scripts/*.lua` of the crate, and the typed
//! calls that run them (one file per family).
//!
//! They run by EVALSHA; `redis::Script` falls back to loading the script when
//! the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). Every
//! script that publishes takes the publish command last (`publish`, or
//! `spublish` on a Redis Cluster).
//!
//! | script | KEYS | ARGV | returns |
//! |---|---|---|---|
//! | `ACQUIRE` | lock hash, counter | lease ms, owner field | `{1,token}` fresh, `{2,token}` re-entered, `{0,pttl}` held, `{-1,0}` wrong type |
//! | `REENTER` | lock hash | lease ms, owner field | hold count, 0 not held, -1 wrong type |
//! | `RELEASE` | lock hash | channel, lease ms, owner field, publish | `{1,n}` unlocked (n receivers), `{0,0}` one hold fewer, `{-1,0}` not held, `{-2,0}` wrong type |
//! | `RENEW` | lock hash per entry | owner field, lease ms per entry | 1 or 0 per entry |
//! | `FORCE_UNLOCK` | lock hash | channel, publish | 1 deleted, 0 free, -1 wrong type |
//! | `RAISE_TOKEN` | lock hash, counter | owner field, token | 1 raised, 0 not held |
//! | `STATUS` | lock hash, counter, line?, place deadlines? | — | `{kind, pttl, token, mode, line, field, count, ...}` |
//! | `FAIR_ACQUIRE` | lock hash, line, place deadlines, counter | lease ms, owner field, place ms, waiter channel prefix, publish | `{1,token}`, `{2,token}`, `{0,pttl,first}`, `{-1,0,0}` wrong type |
//! | `FAIR_RELEASE` | lock hash, line, place deadlines | waiter channel prefix, lease ms, owner field, publish | as `RELEASE` |
//! | `FAIR_LEAVE` | lock hash, line, place deadlines | waiter channel prefix, owner field, publish | 1 left, 0 not in line |
//! | `RW_READ_ACQUIRE` | lock hash, counter, waiting writers | lease ms, read field, write field, timeout prefix, re-enter only | `{1,token}`, `{2,token}`, `{0,wait}`, `{-1,0}` wrong type, `{-3,0}` not reading |
//! | `RW_WRITE_ACQUIRE` | lock hash, counter, waiting writers | lease ms, write field, claim ms, re-enter only, read field | `{1,token}`, `{2,token}`, `{0,pttl}`, `{-1,0}`, `{-3,0}` not writing, `{-4,0}` would deadlock |
//! | `RW_READ_RELEASE` | lock hash | channel, read field, timeout prefix, timeout base, publish | as `RELEASE` |
//! | `RW_WRITE_RELEASE` | lock hash | channel, lease ms, write field, publish | as `RELEASE` |
//! | `RW_WRITER_LEAVE` | waiting writers | channel, write field, publish | 1 withdrawn, 0 no claim |
//! | `RW_READ_RENEW` | lock hash per entry | read field, lease ms, timeout prefix per entry | 1 or 0 per entry |
//! | `SEMAPHORE_TRY_SET` | permit count | channel, permits, publish | 1 set, 0 already set, -1 wrong value |
//! | `SEMAPHORE_ADD` | permit count | channel, delta, publish | `{1,count}`, `{0,count}` refused, `{-1,0}` wrong value |
//! | `SEMAPHORE_ACQUIRE` | permit count | permits | `{1,left}`, `{0,available}`, `{-1,0}` wrong value |
//! | `SEMAPHORE_RELEASE` | permit count | channel, permits, publish | new count, -1 wrong value |
//! | `SEMAPHORE_AVAILABLE` | permit count | — | count, -1 wrong value |
//! | `PERMIT_ACQUIRE` | permit count, expiries | channel, permit id, lease ms, publish | `{1,left}`, `{0,wait}`, `{-1,0}` wrong type |
//! | `PERMIT_RELEASE` | permit count, expiries | channel, permit id, publish | 1 released, 2 released after its lease, 0 unknown, -1 wrong type |
//! | `PERMIT_AVAILABLE` | permit count, expiries | channel, publish | `{count,held}`, `{-1,0}` wrong type |
//! | `PERMIT_RENEW` | expiries per entry | permit id, lease ms per entry | 1 or 0 per entry |
//!
//! Each `.lua` file opens with the full description of its keys, arguments
//! and replies.

pub(crate) mod fair;
pub(crate) mod keys;
pub(crate) mod lock;
pub(crate) mod rw;

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../../scripts/", $file))));
    };
}

script!(ACQUIRE, "acquire.lua");
script!(REENTER, "reenter.lua");
script!(RELEASE, "release.lua");
script!(RENEW, "renew.lua");
script!(FORCE_UNLOCK, "force_unlock.lua");
script!(STATUS, "status.lua");
script!(RAISE_TOKEN, "raise_token.lua");

script!(FAIR_ACQUIRE, "fair_acquire.lua");
script!(FAIR_RELEASE, "fair_release.lua");
script!(FAIR_LEAVE, "fair_leave.lua");

script!(RW_READ_ACQUIRE, "rw_read_acquire.lua");
script!(RW_WRITE_ACQUIRE, "rw_write_acquire.lua");
script!(RW_READ_RELEASE, "rw_read_release.lua");
script!(RW_WRITE_RELEASE, "rw_write_release.lua");
script!(RW_WRITER_LEAVE, "rw_writer_leave.lua");
script!(RW_READ_RENEW, "rw_read_renew.lua");

script!(SEMAPHORE_TRY_SET, "semaphore_try_set.lua");
script!(SEMAPHORE_ADD, "semaphore_add.lua");
script!(SEMAPHORE_ACQUIRE, "semaphore_acquire.lua");
script!(SEMAPHORE_RELEASE, "semaphore_release.lua");
script!(SEMAPHORE_AVAILABLE, "semaphore_available.lua");

script!(PERMIT_ACQUIRE, "permit_acquire.lua");
script!(PERMIT_RELEASE, "permit_release.lua");
script!(PERMIT_AVAILABLE, "permit_available.lua");
script!(PERMIT_RENEW, "permit_renew.lua");

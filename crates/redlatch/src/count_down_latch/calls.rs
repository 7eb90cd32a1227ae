//! The count-down latch's script calls, typed: one function per script
//! (`latch_*.lua`), each one round trip.

use std::sync::Arc;

use super::scripts;
use crate::engine::context::Core;
use crate::engine::script_call::{call, send};
use crate::error::{Error, Result};

use super::keys::LatchKeys;

/// What a latch's key should hold (for [`Error::WrongValue`]).
const COUNT: &str = "a count-down latch's count (a decimal 64-bit integer)";

/// Sets the count if the latch has none: `true` when set.
pub(crate) async fn try_set(core: &Arc<Core>, keys: &LatchKeys, count: u64) -> Result<bool> {
    let mut request = scripts::LATCH_TRY_SET.call(&core.conn);
    request
        .key(&keys.key)
        .arg(&keys.channel)
        .arg(count)
        .arg(core.conn.publish_command());
    // Re-sending a set that may have run would answer "already set" to
    // the caller that set it: a reply that never came is no answer.
    let reply: i64 = send(core, "latch try_set_count", request)
        .await
        .map_err(|error| error.unknown_outcome("latch try_set_count"))?;
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        -1 => Err(wrong_count(keys)),
        other => Err(protocol("latch try_set_count", other)),
    }
}

/// Counts down by one; returns the count left (0: open).
pub(crate) async fn count_down(core: &Arc<Core>, keys: &LatchKeys) -> Result<u64> {
    let mut request = scripts::LATCH_COUNT_DOWN.call(&core.conn);
    request
        .key(&keys.key)
        .arg(&keys.channel)
        .arg(core.conn.publish_command());
    let reply: (i64, String) = send(core, "latch count_down", request).await?;
    read_count(keys, "latch count_down", reply)
}

/// The count now (0: open, or no latch).
pub(crate) async fn count(core: &Arc<Core>, keys: &LatchKeys) -> Result<u64> {
    let mut invocation = scripts::LATCH_COUNT.prepare_invoke();
    invocation.key(&keys.key);
    let reply: (i64, String) = call(core, "latch count", &invocation).await?;
    read_count(keys, "latch count", reply)
}

/// Deletes the latch, waking its waiters: `true` when there was one.
pub(crate) async fn delete(core: &Arc<Core>, keys: &LatchKeys) -> Result<bool> {
    let mut request = scripts::LATCH_DELETE.call(&core.conn);
    request
        .key(&keys.key)
        .arg(&keys.channel)
        .arg(core.conn.publish_command());
    let reply: i64 = send(core, "latch delete", request).await?;
    match reply {
        1 => Ok(true),
        0 => Ok(false),
        -1 => Err(wrong_count(keys)),
        other => Err(protocol("latch delete", other)),
    }
}

/// A `{1, count}` or `{-1, ''}` reply: a count at or below zero (Redisson's
/// `trySetCount` takes any `long`) reads as 0, open, as Redisson's `await`
/// reads it.
fn read_count(keys: &LatchKeys, op: &'static str, reply: (i64, String)) -> Result<u64> {
    match reply {
        (1, count) => match count.parse::<i64>() {
            Ok(count) => Ok(u64::try_from(count).unwrap_or(0)),
            Err(_) => Err(Error::Protocol {
                op,
                detail: format!("count {count:?}"),
            }),
        },
        (-1, _) => Err(wrong_count(keys)),
        (code, _) => Err(protocol(op, code)),
    }
}

fn wrong_count(keys: &LatchKeys) -> Error {
    Error::WrongValue {
        key: keys.key.clone(),
        expected: COUNT,
    }
}

fn protocol(op: &'static str, reply: i64) -> Error {
    Error::Protocol {
        op,
        detail: format!("{reply}"),
    }
}

//! The dead-letter stream `{seckill}:orders:dead`: order entries the
//! consumer cannot write, kept for people to look at and replay.
//!
//! An entry is moved there (`dead_letter.lua`: XADD to the dead-letter
//! stream and XACK from the order stream in one script) with its original
//! fields plus `reason`, `tries` (its delivery count), `source_id` (its id in
//! the order stream) and `error` (what went wrong). The script moves it only
//! while it is still pending for the consumer asking, so an entry another
//! consumer took over meanwhile is never moved twice.
//!
//! A replay (`requeue.lua`) puts a dead letter's order fields back on the
//! order stream, with `replayed_from` = its dead-letter id, and deletes it
//! from the dead-letter stream, in one script: the consumers then write it
//! like any new entry (it gets `--consumer-max-tries` tries again).

use std::collections::HashMap;
use std::sync::LazyLock;

use redis::streams::{StreamId, StreamRangeReply};
use redis::{FromRedisValue, Script, Value};
use redlatch::RedisConnection;

use crate::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM};

/// The dead-letter stream.
pub const DEAD_STREAM: &str = "{seckill}:orders:dead";

/// Most dead letters one list or one replay script call handles.
pub const PAGE: usize = 100;

static MOVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("dead_letter.lua")));
static REQUEUE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("requeue.lua")));

/// Why an entry was moved to the dead-letter stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadReason {
    /// A field is missing or not an integer.
    Malformed,
    /// No voucher with its id in the database.
    VoucherGone,
    /// The voucher has no stock left in the database.
    NoStock,
    /// The user already has an order of the voucher.
    DuplicateUser,
    /// The database refused it `--consumer-max-tries` times.
    MaxTries,
    /// Another order already has its id (Redis lost the id counter).
    IdCollision,
}

impl DeadReason {
    /// The `reason` field and metric label.
    pub fn label(self) -> &'static str {
        match self {
            DeadReason::Malformed => "malformed",
            DeadReason::VoucherGone => "voucher_gone",
            DeadReason::NoStock => "no_stock",
            DeadReason::DuplicateUser => "duplicate_user",
            DeadReason::MaxTries => "max_tries",
            DeadReason::IdCollision => "id_collision",
        }
    }
}

/// What [`move_entry`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Moved, after this many deliveries.
    Dead {
        /// The entry's delivery count.
        tries: u64,
    },
    /// Delivered fewer times than asked: left pending, to retry.
    NotYet {
        /// The entry's delivery count.
        tries: u64,
    },
    /// Not pending for this consumer any more: nothing done.
    NotOurs,
}

/// Moves entry `id`, pending for `consumer`, to the dead-letter stream if it
/// was delivered at least `min_tries` times (0: at once).
///
/// # Errors
/// Redis failures (nothing moved then: the script is atomic).
pub async fn move_entry(
    conn: &mut RedisConnection,
    consumer: &str,
    id: &str,
    reason: DeadReason,
    min_tries: u32,
    error: &str,
) -> redis::RedisResult<Moved> {
    let (code, tries): (i64, u64) = MOVE
        .key(ORDERS_STREAM)
        .key(DEAD_STREAM)
        .arg(CONSUMER_GROUP)
        .arg(consumer)
        .arg(id)
        .arg(reason.label())
        .arg(min_tries)
        .arg(error)
        .invoke_async(conn)
        .await?;
    Ok(match code {
        1 => Moved::Dead { tries },
        0 => Moved::NotYet { tries },
        _ => Moved::NotOurs,
    })
}

/// One dead letter: its id in the dead-letter stream and its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// Its id in the dead-letter stream.
    pub id: String,
    /// Its fields (order fields, `reason`, `tries`, `source_id`, `error`).
    pub fields: HashMap<String, String>,
}

impl DeadLetter {
    fn of_entry(entry: StreamId) -> DeadLetter {
        let fields = entry
            .map
            .into_iter()
            .map(|(name, value)| (name, text_of(value)))
            .collect();
        DeadLetter {
            id: entry.id,
            fields,
        }
    }
}

fn text_of(value: Value) -> String {
    String::from_redis_value(value).unwrap_or_default()
}

/// How many dead letters there are, and up to [`PAGE`] of them, oldest
/// first, after `after` (exclusive) when given.
///
/// # Errors
/// Redis failures.
pub async fn list(
    conn: &mut RedisConnection,
    after: Option<&str>,
) -> redis::RedisResult<(u64, Vec<DeadLetter>)> {
    let start = after.map_or_else(|| "-".to_owned(), |after| format!("({after}"));
    let (count, range): (u64, StreamRangeReply) = redis::pipe()
        .cmd("XLEN")
        .arg(DEAD_STREAM)
        .cmd("XRANGE")
        .arg(DEAD_STREAM)
        .arg(start)
        .arg("+")
        .arg("COUNT")
        .arg(PAGE)
        .query_async(conn)
        .await?;
    Ok((
        count,
        range.ids.into_iter().map(DeadLetter::of_entry).collect(),
    ))
}

/// Puts dead letter `id` back on the order stream; returns its new id there,
/// or `None` when there is no such dead letter.
///
/// # Errors
/// Redis failures.
pub async fn replay(conn: &mut RedisConnection, id: &str) -> redis::RedisResult<Option<String>> {
    let moved: Vec<String> = REQUEUE
        .key(DEAD_STREAM)
        .key(ORDERS_STREAM)
        .arg(id)
        .arg(id)
        .arg(1)
        .invoke_async(conn)
        .await?;
    Ok(moved.into_iter().next())
}

/// Puts every dead letter present when called back on the order stream, in
/// scripts of up to [`PAGE`] entries; returns how many. Entries dead-lettered
/// while it runs (perhaps replayed ones failing again) are left for the
/// next call, so it always ends.
///
/// # Errors
/// Redis failures (the entries moved before stay moved).
pub async fn replay_all(conn: &mut RedisConnection) -> redis::RedisResult<usize> {
    let newest: StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(DEAD_STREAM)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await?;
    let Some(last) = newest.ids.into_iter().next().map(|entry| entry.id) else {
        return Ok(0);
    };
    let mut replayed = 0;
    loop {
        let moved: Vec<String> = REQUEUE
            .key(DEAD_STREAM)
            .key(ORDERS_STREAM)
            .arg("-")
            .arg(&last)
            .arg(PAGE)
            .invoke_async(conn)
            .await?;
        if moved.is_empty() {
            return Ok(replayed);
        }
        replayed += moved.len();
    }
}

/// Whether `id` is a full stream id, `MILLISECONDS-SEQUENCE`.
pub fn is_stream_id(id: &str) -> bool {
    let Some((ms, seq)) = id.split_once('-') else {
        return false;
    };
    let digits = |part: &str| {
        !part.is_empty() && part.len() <= 20 && part.bytes().all(|b| b.is_ascii_digit())
    };
    digits(ms) && digits(seq) && ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_are_two_numbers() {
        assert!(is_stream_id("1712345678901-0"));
        assert!(is_stream_id("0-1"));
        for bad in [
            "",
            "1",
            "-1",
            "1-",
            "a-1",
            "1-2-3",
            "1 -2",
            "99999999999999999999-0",
        ] {
            assert!(!is_stream_id(bad), "{bad:?}");
        }
    }
}

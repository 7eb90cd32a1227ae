//! Order ids from Redis: seed 004's `RedisIdWorker`.
//!
//! An id is a positive `i64`:
//!
//! ```text
//!  bit 63   62 ............ 32   31 ............ 0
//!  [ 0 ] [ seconds since EPOCH ] [ sequence number ]
//! ```
//!
//! The sequence is `INCR {seckill}:icr:order:YYYYMMDD` (UTC day of the timestamp), one
//! counter per day shared by every instance. Two ids with the same second
//! share the day, hence the counter, hence differ in sequence: ids are unique
//! across instances whatever their clocks say. They are ordered by second
//! (across instances, up to clock skew) and, within a second, by the order
//! the counter was incremented; one instance calling sequentially gets
//! strictly increasing ids. 31 bits of seconds last until 2092; 32 bits of
//! sequence allow 4 billion ids a day. The day keys are never deleted (one
//! small key a day).

use chrono::{DateTime, TimeZone, Utc};
use redlatch::RedisConnection;

/// The ids' epoch: 2024-01-01T00:00:00Z, in Unix seconds.
pub const EPOCH_UNIX_SECONDS: i64 = 1_704_067_200;
/// Bits of the sequence number, below the timestamp.
pub const SEQUENCE_BITS: u32 = 32;
/// The counter keys' prefix; the UTC date `YYYYMMDD` follows.
/// The `{seckill}` hash tag puts it in the slot of every other key of the
/// shop: the reservation script draws ids too, and on a Redis Cluster a
/// script touches one slot.
pub const KEY_PREFIX: &str = "{seckill}:icr:order:";

/// Why an id could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IdError {
    /// Redis did not answer the INCR.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The clock is before the epoch or beyond 2092, or a day's counter passed
    /// 2^32: the layout cannot hold the id.
    #[error("cannot make an order id: {0}")]
    OutOfRange(String),
}

/// Hands out order ids; cheap to clone (one multiplexed Redis connection).
#[derive(Clone)]
pub struct IdWorker {
    conn: RedisConnection,
}

impl IdWorker {
    /// An id worker over `conn`.
    pub fn new(conn: RedisConnection) -> IdWorker {
        IdWorker { conn }
    }

    /// The next id: one INCR round trip.
    ///
    /// # Errors
    /// [`IdError::Redis`] when Redis fails; [`IdError::OutOfRange`] as documented.
    pub async fn next_id(&self) -> Result<i64, IdError> {
        let now = Utc::now();
        let key = day_key(now);
        let mut conn = self.conn.clone();
        let sequence: u64 = redis::cmd("INCR").arg(&key).query_async(&mut conn).await?;
        compose(now.timestamp() - EPOCH_UNIX_SECONDS, sequence)
    }
}

/// Seconds from the ids' epoch to `now`: an id's upper bits.
///
/// # Errors
/// [`IdError::OutOfRange`] when they do not fit 31 bits.
pub fn seconds_since_epoch(now: DateTime<Utc>) -> Result<i64, IdError> {
    let seconds = now.timestamp() - EPOCH_UNIX_SECONDS;
    compose(seconds, 0)?;
    Ok(seconds)
}

/// The counter key of `now`'s UTC day: `{seckill}:icr:order:YYYYMMDD`.
pub fn day_key(now: DateTime<Utc>) -> String {
    format!("{KEY_PREFIX}{}", now.format("%Y%m%d"))
}

/// Packs seconds since the epoch and a sequence number into an id.
///
/// # Errors
/// [`IdError::OutOfRange`] when either does not fit its bits.
pub fn compose(seconds: i64, sequence: u64) -> Result<i64, IdError> {
    if !(0..(1i64 << 31)).contains(&seconds) {
        return Err(IdError::OutOfRange(format!(
            "{seconds} s since the epoch does not fit 31 bits"
        )));
    }
    if sequence >= (1u64 << SEQUENCE_BITS) {
        return Err(IdError::OutOfRange(format!(
            "sequence {sequence} does not fit {SEQUENCE_BITS} bits"
        )));
    }
    Ok((seconds << SEQUENCE_BITS) | sequence as i64)
}

/// Splits an id into (seconds since the epoch, sequence number).
pub fn decompose(id: i64) -> (i64, u64) {
    (
        id >> SEQUENCE_BITS,
        (id as u64) & ((1u64 << SEQUENCE_BITS) - 1),
    )
}

/// The second an id was made in (UTC), if the id is well formed.
pub fn timestamp_of(id: i64) -> Option<DateTime<Utc>> {
    let (seconds, _) = decompose(id);
    Utc.timestamp_opt(EPOCH_UNIX_SECONDS + seconds, 0).single()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_sits_above_the_sequence() {
        let id = compose(1, 5).unwrap();
        assert_eq!(id, (1 << 32) | 5);
        assert_eq!(decompose(id), (1, 5));
        let id = compose(0x7fff_ffff, 0xffff_ffff).unwrap();
        assert_eq!(id, i64::MAX);
        assert_eq!(decompose(id), (0x7fff_ffff, 0xffff_ffff));
    }

    #[test]
    fn later_second_beats_any_sequence() {
        assert!(compose(11, 1).unwrap() > compose(10, 0xffff_ffff).unwrap());
        assert!(compose(10, 2).unwrap() > compose(10, 1).unwrap());
    }

    #[test]
    fn out_of_range_parts_are_refused() {
        assert!(compose(-1, 1).is_err());
        assert!(compose(1 << 31, 1).is_err());
        assert!(compose(1, 1 << 32).is_err());
    }

    #[test]
    fn day_key_and_timestamp_follow_the_epoch() {
        let at = Utc.with_ymd_and_hms(2025, 3, 9, 23, 59, 59).unwrap();
        assert_eq!(day_key(at), "{seckill}:icr:order:20250309");
        let id = compose(at.timestamp() - EPOCH_UNIX_SECONDS, 42).unwrap();
        assert_eq!(timestamp_of(id), Some(at));
        let epoch = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(epoch.timestamp(), EPOCH_UNIX_SECONDS);
    }
}

//! The fair lock's scripts: acquire or take a place in line, leave the line, release.

use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use crate::base::request::Request;
use crate::error::{Error, Result};
use crate::fair_lock::keys::FairKeys;
use crate::scripts::acquired::{Acquired, unexpected};
use crate::scripts::released::{Released, released};
use crate::transport::{Connection, bounded};

/// The times one fair acquire works with, in ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlaceTimes {
    /// The lock's lease.
    pub(crate) lease_ms: u64,
    /// Redisson's wait time W: a place in line is dated W after the one
    /// before it, and moves W forward each time a waiter ahead leaves the line.
    pub(crate) wait_ms: u64,
    /// How long a redlatch waiter's sign of life lasts; 0: a single try
    /// that takes no place.
    pub(crate) place_ms: u64,
    /// The first lease of a hold a release hands to this waiter; 0: it
    /// takes no hand-off. One that does (an anonymous owner, unique to one
    /// acquire) leaves its terms with its place, and a hold it finds is
    /// the one handed to it.
    pub(crate) hand_off_ms: u64,
}

/// What one attempt of the fair acquire script found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FairReply {
    Acquired(Acquired),
    /// In line (or not, for a single try): the holder's remaining lease
    /// (-1: no expiry, 0: free but another waiter goes first), and the
    /// fencing counter's value: a hand-off whose token is above it was
    /// written after this call ran.
    Waiting {
        pttl_ms: i64,
        first: bool,
        counter: u64,
    },
}

pub(crate) async fn acquire(
    conn: &mut Connection,
    keys: &FairKeys,
    owner: &str,
    times: PlaceTimes,
    sent_at: LeaseInstant,
    limit: Duration,
) -> Result<FairReply> {
    let mut call = crate::fair_lock::scripts::FAIR_ACQUIRE.call(conn);
    call.key(&keys.lock.key)
        .key(&keys.line.queue)
        .key(&keys.line.timeouts)
        .key(&keys.lock.token())
        .key(&keys.line.alive)
        .key(&keys.terms)
        .arg(times.lease_ms)
        .arg(owner)
        .arg(times.wait_ms)
        .arg(times.place_ms)
        .arg(keys.lock.channel())
        .arg(conn.publish_command())
        .arg(times.hand_off_ms);
    let reply: Vec<i64> = call.run(conn, "fair acquire", limit).await?;
    if let Some(acquired) = Acquired::read(&reply, sent_at) {
        return Ok(FairReply::Acquired(acquired));
    }
    match reply.as_slice() {
        [0, pttl_ms, first, counter] => Ok(FairReply::Waiting {
            pttl_ms: *pttl_ms,
            first: *first == 1,
            counter: u64::try_from(*counter).unwrap_or(0),
        }),
        other => Err(unexpected("fair acquire", &keys.lock.key, other)),
    }
}

/// What a waiter that took its place and subscribed since reads to park at
/// once: the line's first waiter (owner field), the lock's `PTTL` (-2:
/// free), and whether `owner` holds the lock (handed over before the
/// subscription could hear it).
#[derive(Debug)]
pub(crate) struct LineHead {
    pub(crate) first: Option<String>,
    pub(crate) pttl_ms: i64,
    pub(crate) holds: bool,
}

/// Reads the [`LineHead`] by plain commands in one pipeline, no script. One
/// round trip, at most `limit`. Not for a cluster (two keys in one pipeline).
pub(crate) async fn line_head(
    conn: &mut Connection,
    keys: &FairKeys,
    owner: &str,
    limit: Duration,
) -> Result<LineHead> {
    let call = async {
        redis::pipe()
            .cmd("LINDEX")
            .arg(&keys.line.queue)
            .arg(0)
            .cmd("PTTL")
            .arg(&*keys.lock.key)
            .cmd("HEXISTS")
            .arg(&*keys.lock.key)
            .arg(owner)
            .query_async::<(Option<String>, i64, bool)>(conn)
            .await
            .map_err(|error| Error::from_redis("fair acquire", error))
    };
    let (first, pttl_ms, holds) = bounded("fair acquire", limit, call).await?;
    Ok(LineHead {
        first,
        pttl_ms,
        holds,
    })
}

/// Leaves the line; the waiters behind move one place up (`wait_ms` off
/// their deadlines, the wait time this owner joined with). An owner that
/// takes hand-offs gives back a hold handed to it (no guard took it). One
/// round trip, at most `limit`.
pub(crate) async fn leave(
    conn: &mut Connection,
    keys: &FairKeys,
    owner: &str,
    times: PlaceTimes,
    limit: Duration,
) -> Result<()> {
    let mut call = crate::fair_lock::scripts::FAIR_LEAVE.call(conn);
    call.key(&keys.lock.key)
        .key(&keys.line.queue)
        .key(&keys.line.timeouts)
        .key(&keys.line.alive)
        .key(&keys.terms)
        .key(&keys.lock.token())
        .arg(keys.lock.channel())
        .arg(owner)
        .arg(conn.publish_command())
        .arg(times.wait_ms)
        .arg(if times.hand_off_ms > 0 { "1" } else { "0" });
    call.run::<i64>(conn, "fair leave", limit).await.map(drop)
}

/// Drops one hold of a fair lock; the last one wakes the first waiter, or
/// hands it the lock (a redlatch waiter that left its terms). One round
/// trip, at most `limit`.
pub(crate) async fn release(
    conn: &mut Connection,
    keys: &FairKeys,
    request: &Request,
    limit: Duration,
) -> Result<Released> {
    let mut call = crate::fair_lock::scripts::FAIR_RELEASE.call(conn);
    call.key(&keys.lock.key)
        .key(&keys.line.queue)
        .key(&keys.line.timeouts)
        .key(&keys.line.alive)
        .key(&keys.terms)
        .key(&keys.lock.token())
        .arg(keys.lock.channel())
        .arg(request.lease_ms)
        .arg(&*request.owner)
        .arg(conn.publish_command());
    let reply: Vec<i64> = call.run(conn, "release", limit).await?;
    // Courtesy is for the reentrant lock: here the release names who is next.
    released(&request.keys.key, &reply).map(|released| match released {
        Released::Unlocked { .. } => Released::Unlocked { receivers: 0 },
        decremented => decremented,
    })
}

//! The count-down latch: Redisson's `RCountDownLatch`, in Rust. Its keys
//! (`keys.rs`), its scripts (`scripts.rs`, registered by one line in
//! `primitives.rs`) and their typed calls (`calls.rs`), its plug-in for the
//! engine's wait loop (`wait.rs`), its handle and how a client makes it
//! (here: `Client::handle::<CountDownLatch>`), and its blocking calls
//! (`blocking.rs`). Outside this folder it is one line in `primitives.rs`
//! and its `mod`/`pub use` lines in `lib.rs`.

#[cfg(feature = "blocking")]
mod blocking;
mod calls;
mod keys;
pub(crate) mod scripts;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::context::Core;
use crate::engine::wait::{Wait, wait_for};
use crate::error::{Error, Result};

use keys::LatchKeys;
use wait::LatchAwait;

/// The largest count a latch takes: 2^63 − 1, the largest value Redis's
/// `DECR` works on.
const MAX_COUNT: u64 = i64::MAX as u64;

/// A handle to one named count-down latch: Redisson's `RCountDownLatch`,
/// shared by every process that uses the name.
///
/// A latch is a count in Redis. [`try_set_count`](CountDownLatch::try_set_count)
/// gives it a count (only when it has none); each
/// [`count_down`](CountDownLatch::count_down) takes one off; the call that
/// takes it to zero deletes the key and wakes every waiter, in every
/// process, at once. [`await_zero`](CountDownLatch::await_zero) waits until
/// then, and [`await_within`](CountDownLatch::await_within) for a while at
/// most. A latch with no count is open: awaiting it returns at once, and
/// it can be set again (Redisson's "reset").
///
/// Nothing is held, so nothing is renewed or lost: a process that dies
/// before its `count_down` leaves the count where it was (wait with a
/// bound, or [`delete`](CountDownLatch::delete) the latch, where that can
/// happen). The key has no expiry.
///
/// # Keys
///
/// `PREFIX+NAME` (string: the count) and the channel
/// `redisson_countdownlatch__channel__{PREFIX+NAME}`, on which a new count
/// publishes `1` and the count reaching zero `0`: the layout of Redisson's
/// `RCountDownLatch`, so Java and Rust services can share one. Waiters of a
/// client share one subscription per latch.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let ready = client.count_down_latch("shards-loaded");
/// assert!(ready.try_set_count(2).await?);         // only the first caller sets it
///
/// let waiter = tokio::spawn({
///     let ready = ready.clone();
///     async move { ready.await_zero().await }      // parks until the count is 0
/// });
/// assert_eq!(ready.count_down().await?, 1);       // one shard loaded
/// assert_eq!(ready.count_down().await?, 0);       // the last: every waiter wakes
/// waiter.await.unwrap()?;
/// assert_eq!(ready.count().await?, 0);            // open, and gone from Redis
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    core: Arc<Core>,
    name: Arc<str>,
}

impl Primitive for CountDownLatch {
    fn from_client(state: ClientState, name: String) -> CountDownLatch {
        CountDownLatch {
            core: state.core,
            name: Arc::from(name),
        }
    }
}

impl CountDownLatch {
    /// The latch's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the latch `count` if it has no count now (never set, or
    /// counted down to zero, or deleted), and returns whether it did: every
    /// process may call it, the first wins. A count at or below zero that a
    /// Redisson client set (its `trySetCount` takes any `long`) is a count
    /// here too, as there: it reads as 0, but count it down or delete it
    /// before setting another. One round trip; touches `PREFIX+NAME`,
    /// publishes `1` on the channel when set.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] for 0 or a count above 2^63 − 1 (nothing
    /// sent), [`Error::InvalidName`], [`Error::WrongValue`] (the key holds
    /// something else: left alone), connection errors;
    /// [`Error::OutcomeUnknown`] when the call may have set the count but no
    /// answer came (not transient: a repeat would answer `false` to the
    /// caller that set it; read [`CountDownLatch::count`] instead).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set the count.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || count > MAX_COUNT {
            return Err(Error::InvalidCount {
                name: self.name.to_string(),
                count,
                reason: if count == 0 {
                    "a count of zero is an open latch: there is nothing to set"
                } else {
                    "above 2^63 - 1, the largest count Redis can count down"
                },
            });
        }
        let keys = self.keys()?;
        calls::try_set(&self.core, &keys, count).await
    }

    /// Takes one off the count and returns what is left. The call that
    /// leaves 0 deletes the key and publishes `0`, which wakes every
    /// waiter; on an open latch (no count) it does nothing and returns 0.
    /// One round trip; touches `PREFIX+NAME`.
    ///
    /// Not repeated blindly: on a Redis Cluster a request sent again to
    /// learn its outcome runs once (docs/ARCHITECTURE.md, "Retries").
    ///
    /// # Errors
    /// [`Error::WrongValue`] (left alone), [`Error::InvalidName`],
    /// [`Error::OutcomeUnknown`] (sent, no reply: the count may or may not
    /// be lower; read [`count`](CountDownLatch::count) rather than count
    /// down again blindly), connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have counted down.
    pub async fn count_down(&self) -> Result<u64> {
        let keys = self.keys()?;
        calls::count_down(&self.core, &keys)
            .await
            .map_err(|error| error.unknown_outcome("latch count_down"))
    }

    /// The count now: 0 when the latch is open (no count, or a count at or
    /// below zero, which a Redisson client may set). One round trip; reads
    /// `PREFIX+NAME`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongValue`], connection errors.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn count(&self) -> Result<u64> {
        let keys = self.keys()?;
        calls::count(&self.core, &keys).await
    }

    /// Deletes the latch, which opens it: its waiters (redlatch's and
    /// Redisson's) wake and find no count. Returns whether there was one.
    /// One round trip; touches `PREFIX+NAME`, publishes `0` on the channel
    /// when it deleted (where Redisson's `delete` publishes `1`, on which
    /// its own waiters keep waiting: docs/REDIS-DATA.md).
    ///
    /// # Errors
    /// [`Error::WrongValue`] when the key holds something else (another
    /// kind's key: left alone), [`Error::InvalidName`],
    /// [`Error::OutcomeUnknown`] (sent, no reply), connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have deleted it.
    pub async fn delete(&self) -> Result<bool> {
        let keys = self.keys()?;
        calls::delete(&self.core, &keys)
            .await
            .map_err(|error| error.unknown_outcome("latch delete"))
    }

    /// Waits until the count is zero: at once when it is (a latch never
    /// set is open), else until the message of the count down that opens
    /// it. [`await_within(None)`](CountDownLatch::await_within).
    ///
    /// # Errors
    /// As [`CountDownLatch::await_within`].
    ///
    /// # Cancel safety
    /// As [`CountDownLatch::await_within`].
    pub async fn await_zero(&self) -> Result<()> {
        self.await_within(None).await.map(drop)
    }

    /// Waits at most `wait` (`None`: as long as it takes) until the count
    /// is zero; returns whether it is. `Some(Duration::ZERO)` looks once.
    ///
    /// One round trip when the latch is open. Otherwise the call subscribes
    /// to the latch's channel (one subscription per latch per client,
    /// shared by its waiters), reads the count again (a count down between
    /// the first read and the subscription would otherwise be missed), and
    /// parks until a message on the channel, a resubscription, or 5 s
    /// without either (a safety net for a latch deleted by hand); each
    /// wake-up costs one round trip. Every waiter of the client wakes on
    /// each message: the latch opens for all at once. Every call, retry and
    /// back-off fits in `wait`. A latch set again right after it opened
    /// (Redisson's reset) may keep a waiter that reads it only then waiting
    /// for the new count, as a Redisson waiter would. A wait that parks
    /// counts in the engine's metrics as every primitive's does
    /// (`redlatch_contended_waits_total`, `redlatch_wakeups_total`; a
    /// re-read after 5 s as `reason="lease_end"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// use std::time::Duration;
    ///
    /// let latch = client.count_down_latch("workers-done");
    /// assert!(latch.await_within(Some(Duration::ZERO)).await?); // never set: open
    /// latch.try_set_count(1).await?;
    /// assert!(!latch.await_within(Some(Duration::from_millis(50))).await?);
    /// latch.count_down().await?;
    /// assert!(latch.await_within(Some(Duration::from_millis(50))).await?);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongValue`], connection errors
    /// (reads are retried by the client's retry policy first);
    /// [`Error::ResponseTimeout`] naming the caller's wait
    /// ([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not
    /// answered when it ran out.
    ///
    /// # Cancel safety
    /// Safe: dropping the future stops waiting and leaves nothing behind
    /// (the subscription is given up with the client's last waiter on the
    /// latch).
    pub async fn await_within(&self, wait: Option<Duration>) -> Result<bool> {
        let keys = Arc::new(self.keys()?);
        let mut waiting = LatchAwait {
            core: self.core.clone(),
            keys,
        };
        Ok(wait_for(&mut waiting, Wait::within(wait)).await?.is_some())
    }

    fn keys(&self) -> Result<LatchKeys> {
        let settings = self.core.current_settings();
        LatchKeys::new(&settings.key_prefix, &self.name)?.checked_for(&self.core.conn)
    }
}

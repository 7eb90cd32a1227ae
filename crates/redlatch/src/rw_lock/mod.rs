//! The read-write lock: many readers or one writer, and writers are not starved.

pub(crate) mod guard;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod attempt;
pub(crate) mod calls;
pub(crate) mod family;
pub(crate) mod keys;
pub(crate) mod register;
pub(crate) mod scripts;
pub(crate) mod sides;

use crate::base::guard::Guard;
use crate::base::handle_options::handle_options;
use crate::base::status::LockStatus;
use crate::engine::acquire::{Terms, acquire_measured};
use crate::engine::attempt::attempt;
use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::context::Core;
use crate::engine::deadlock_check::WaitsFor;
use crate::engine::place::Place;
use crate::engine::renewal::renewal_period;
use crate::engine::wait::{Acquisition, Step, Wait, Wakes, wait_for};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, Result};
use crate::fair_lock::DEFAULT_PLACE_LEASE;
use crate::rw_lock::attempt::RwCall;
use crate::rw_lock::calls::{RwReply, Side};
use crate::rw_lock::guard::{ReadGuard, WriteGuard};
use crate::rw_lock::keys::RwKeys;
use crate::rw_lock::register::register;
use crate::settings::{RetryPolicy, limits};

/// How long to wait before re-checking a lock that has no expiry.
const NO_EXPIRY_RECHECK: Duration = Duration::from_secs(1);

/// A read-write lock: Redisson's `RReadWriteLock`, in Rust. Many readers
/// hold it at once, or one writer alone.
///
/// [`read`](ReadWriteLock::read) returns a [`ReadGuard`],
/// [`write`](ReadWriteLock::write) a [`WriteGuard`]; both have the [`Guard`]
/// conventions (fencing token, [`lost`](ReadGuard::lost), release on drop,
/// watchdog renewal, anonymous owners unless named with
/// [`with_owner`](ReadWriteLock::with_owner)).
///
/// - **Reentrant**, both sides: re-enter a guard, or acquire again as the
///   same named owner.
/// - **Downgrade**: a writer may read, then give up writing
///   ([`WriteGuard::downgrade`]); no other writer gets in between. There is
///   no upgrade: an owner that reads and asks to write gets
///   [`Error::WouldDeadlock`] (it would wait for itself); release the read first.
///
/// # Writers are not starved
///
/// A writer that has to wait claims its place in Redis (a sorted set of
/// waiting writers). While a claim is live, *new* readers wait too; readers
/// already holding finish, the last one's release wakes the writer, and the
/// writer gets the lock even under a continuous stream of readers. Re-entries
/// of readers that already hold never wait (that would deadlock). A claim
/// has a place lease like a fair lock's waiter ([`FairLock::DEFAULT_PLACE_LEASE`](crate::FairLock::DEFAULT_PLACE_LEASE),
/// renewed every third of it while the writer waits), so a writer that dies
/// stops holding readers back within one place lease. Waiting writers among
/// themselves are not ordered.
///
/// Redisson clients do not know the claim: a Redisson reader still enters
/// while a redlatch writer waits (as among Redisson clients, where readers
/// can starve writers). Redisson readers and writers otherwise exclude
/// redlatch's as usual.
///
/// # Keys
///
/// Redisson's layout: the hash `PREFIX+NAME` with field `mode` (`read` or
/// `write`), read holders `<client-id>:<owner>` and the writer
/// `<client-id>:<owner>:write` → hold count; one key per read hold,
/// `{PREFIX+NAME}:<client-id>:<owner>:rwlock_timeout:<n>`, with the lease (a
/// reader that dies is forgotten when its keys expire); the channel
/// `redisson_rwlock:{PREFIX+NAME}`; the shared fencing counter (as
/// [`Lock`](crate::Lock)'s). redlatch adds the waiting writers'
/// claims, `redlatch_rwlock_writers:{PREFIX+NAME}` (zset, server time in ms).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let lock = client.read_write_lock("catalog");
/// let first = lock.read().await?;
/// let second = lock.read().await?;          // readers share it
/// assert!(lock.try_write().await?.is_none()); // a writer does not get in
/// drop((first, second));
///
/// let writer = lock.write().await?;
/// let reader = writer.downgrade().await?;   // keeps reading, lets readers in
/// reader.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    core: Arc<Core>,
    name: Arc<str>,
    owner: Option<Arc<str>>,
    place_lease: Duration,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
}

handle_options!(ReadWriteLock, "read_write_lock", "write");

impl Primitive for ReadWriteLock {
    fn from_client(state: ClientState, name: String) -> ReadWriteLock {
        ReadWriteLock::new(state.core, name)
    }
}

impl ReadWriteLock {
    pub(crate) fn new(core: Arc<Core>, name: String) -> ReadWriteLock {
        ReadWriteLock {
            core,
            name: Arc::from(name),
            owner: None,
            place_lease: DEFAULT_PLACE_LEASE,
            lease: None,
        }
    }
}

impl ReadWriteLock {
    /// The same lock with another place lease for waiting writers' claims
    /// (see [`ReadWriteLock`]). Checked when the lock is used:
    /// [`Error::InvalidDuration`] unless 30 ms ≤ `lease` ≤ 30 days.
    pub fn with_place_lease(mut self, lease: Duration) -> ReadWriteLock {
        self.place_lease = lease;
        self
    }

    /// Waits until this owner may read, then returns a read guard, or for at
    /// most the client's [`wait_timeout`](crate::Settings::wait_timeout) when
    /// it is set (none by default); the watchdog renews it until the guard
    /// goes (unless [`ReadWriteLock::with_lease`]). Waits while a writer holds
    /// the lock or waits for it (unless this owner reads already, or writes).
    ///
    /// One round trip when it may read. Otherwise the call subscribes to the
    /// lock's channel and parks until a release message (which wakes every
    /// waiter of this process on the lock), the holder's lease or the waiting
    /// writer's claim ends; each wake-up costs one round trip.
    ///
    /// Touches the lock hash, one timeout key, the counter, the writers' claims.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidOwner`], [`Error::WrongType`],
    /// [`Error::Unavailable`], [`Error::ResponseTimeout`]; [`Error::Timeout`]
    /// when the client's wait timeout ran out.
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting and leaves nothing behind: a waiting
    /// reader writes nothing to Redis, and an attempt in flight completes and
    /// gives back a hold it took.
    pub fn read(&self) -> impl Future<Output = Result<ReadGuard>> + Send + '_ {
        self.read_within(self.core.current_settings().wait_timeout)
    }

    /// One attempt to read: `None` when a writer holds or waits. One round trip.
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        Ok(self
            .acquire(Side::Read, Wait::Once)
            .await?
            .map(ReadGuard::new))
    }

    /// Waits to read as long as `wait` says: `None` for ever, `Some(wait)`
    /// at most `wait` (a zero one makes one attempt).
    ///
    /// Every call, retry and back-off fits in `wait` (one deadline for the
    /// call): a stalled, slow or unreachable server costs the wait, not a
    /// response timeout per attempt.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::ResponseTimeout`] naming the caller's wait
    /// ([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not
    /// answered when it ran out; else as [`ReadWriteLock::read`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::read`].
    pub async fn read_within(&self, wait: Option<Duration>) -> Result<ReadGuard> {
        let guard = self.acquire(Side::Read, Wait::within(wait)).await?;
        let guard = guard.ok_or_else(|| self.timeout(wait.unwrap_or(Duration::MAX)))?;
        Ok(ReadGuard::new(guard))
    }

    /// Waits until this owner holds the lock alone, then returns a write
    /// guard, or for at most the client's
    /// [`wait_timeout`](crate::Settings::wait_timeout) when it is set (none
    /// by default); the watchdog renews it until the guard goes (unless
    /// [`ReadWriteLock::with_lease`]).
    ///
    /// One round trip when the lock is free. Otherwise the call claims its
    /// place as a waiting writer (new readers now wait behind it), subscribes
    /// to the lock's channel and parks until a release message, the holder's
    /// lease ends, or the claim needs renewing (a third of the place lease);
    /// each wake-up costs one round trip.
    ///
    /// Touches the lock hash, the counter, the writers' claims.
    ///
    /// # Errors
    /// As [`ReadWriteLock::read`]; [`Error::InvalidDuration`] for a bad place
    /// lease; [`Error::WouldDeadlock`] when this (named) owner reads the lock.
    ///
    /// # Cancel safety
    /// Dropping the future withdraws the claim at once (from a task of its
    /// own) and wakes the readers queued behind it; an attempt in flight
    /// completes and gives back a hold it took. Nothing remains in Redis.
    pub fn write(&self) -> impl Future<Output = Result<WriteGuard>> + Send + '_ {
        self.write_within(self.core.current_settings().wait_timeout)
    }

    /// One attempt to write: `None` when anyone else holds the lock. Claims
    /// nothing, so readers are not held back. One round trip.
    ///
    /// # Errors
    /// As [`ReadWriteLock::write`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::write`].
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        Ok(self
            .acquire(Side::Write, Wait::Once)
            .await?
            .map(WriteGuard::new))
    }

    /// Waits to write as long as `wait` says: `None` for ever, `Some(wait)`
    /// at most `wait` (a zero one makes one attempt, claiming nothing);
    /// withdraws the claim when it runs out.
    ///
    /// Every call, retry and back-off fits in `wait` (one deadline for the
    /// call): a stalled, slow or unreachable server costs the wait, not a
    /// response timeout per attempt.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::ResponseTimeout`] naming the caller's wait
    /// ([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not
    /// answered when it ran out; else as [`ReadWriteLock::write`].
    ///
    /// # Cancel safety
    /// As [`ReadWriteLock::write`].
    pub async fn write_within(&self, wait: Option<Duration>) -> Result<WriteGuard> {
        let guard = self.acquire(Side::Write, Wait::within(wait)).await?;
        let guard = guard.ok_or_else(|| self.timeout(wait.unwrap_or(Duration::MAX)))?;
        Ok(WriteGuard::new(guard))
    }

    /// A consistent snapshot of the lock: [`LockStatus::mode`] (read or
    /// write, `None` when free), the holders (readers, and the writer, whose
    /// field ends in `:write`) with their hold counts, the remaining lease,
    /// the last fencing token, and the client connections waiting on its
    /// channel.
    ///
    /// Two round trips: one script, so the parts agree, then PUBSUB NUMSUB.
    /// Reads the lock hash and its fencing counter; writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// use redlatch::LockMode;
    ///
    /// let lock = client.read_write_lock("doc");
    /// let read = lock.read().await?;
    /// assert_eq!(lock.status().await?.mode, Some(LockMode::Read));
    /// read.release().await?;
    /// assert_eq!(lock.status().await?.mode, None);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], connection errors.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn status(&self) -> Result<LockStatus> {
        crate::base::status::read(&self.core, &self.name).await
    }

    async fn acquire(&self, side: Side, wait: Wait) -> Result<Option<Guard>> {
        let span = tracing::debug_span!("redlatch.rw_acquire", lock = %self.name, ?side);
        acquire_measured(span, self.wait_for(side, wait)).await
    }

    async fn wait_for(&self, side: Side, wait: Wait) -> Result<Option<Guard>> {
        let core = &self.core;
        let settings = core.current_settings();
        let keys = Arc::new(
            RwKeys::new(&settings.key_prefix, &self.name)?
                .per_name_counter(settings.per_name_token_counters)
                .checked_for(&core.conn)?,
        );
        let terms = Terms::choose(core, self.owner.as_deref(), self.lease)?;
        let claim_ms = match (side, wait) {
            (Side::Write, Wait::For(_) | Wait::Forever) => {
                limits::watchdog_lease_millis("place lease", self.place_lease)?
            }
            _ => 0,
        };
        let mut acquisition = RwAcquisition {
            lock: self,
            keys,
            side,
            terms,
            claim_ms,
            claim: None,
        };
        wait_for(&mut acquisition, wait).await
    }
}

/// A read or write acquire, as the wait loop drives it. Every release wakes
/// every waiter of this client: many readers may enter at once.
struct RwAcquisition<'a> {
    lock: &'a ReadWriteLock,
    keys: Arc<RwKeys>,
    side: Side,
    /// The owner's read field is `terms.owner`; the write field adds `:write`.
    terms: Terms,
    /// How long a waiting writer's claim lasts without a new attempt; 0 claims nothing.
    claim_ms: u64,
    /// The claim this writer holds, withdrawn when dropped.
    claim: Option<Place<RwCall>>,
}

impl RwAcquisition<'_> {
    fn call(&self) -> RwCall {
        RwCall {
            keys: self.keys.clone(),
            side: self.side,
            reader: self.terms.owner.clone(),
            named: self.terms.named,
            lease_ms: self.terms.lease_ms,
            claim_ms: self.claim_ms,
        }
    }
}

impl Acquisition for RwAcquisition<'_> {
    type Output = Guard;

    async fn attempt(&mut self) -> Result<Step<Guard>> {
        let core = &self.lock.core;
        let call = self.call();
        match attempt(core, call.clone()).await? {
            RwReply::Acquired(acquired) => {
                // Taking the write lock withdrew the claim in the same script.
                if let Some(claim) = self.claim.take() {
                    claim.forget();
                }
                Ok(Step::Done {
                    value: register(core, &call, &self.terms, acquired),
                    more_left: false,
                })
            }
            RwReply::Blocked { wait_ms } => {
                if self.claim_ms > 0 && self.claim.is_none() {
                    self.claim = Some(Place::new(core.clone(), call));
                }
                let mut retry_in =
                    u64::try_from(wait_ms).map_or(NO_EXPIRY_RECHECK, Duration::from_millis);
                if self.claim_ms > 0 {
                    // Try again before the claim runs out.
                    retry_in = retry_in.min(renewal_period(self.claim_ms));
                }
                Ok(Step::Busy { retry_in })
            }
        }
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(vec![
            self.lock.core.wakeups.join_broadcast(&self.keys.channel),
        ])
    }

    /// Readers and writers alike: a writer waits for every holder (the
    /// readers), a reader for the writer (or, behind a waiting writer's
    /// claim, for the readers that writer waits for).
    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        Some(WaitsFor {
            core: &self.lock.core,
            key: &self.keys.key,
            owner: &self.terms.owner,
        })
    }

    fn wakes(&self) -> Wakes {
        Wakes::All
    }

    /// The outcome is unknown: the attempt gives back whatever the old
    /// owner may have (a claim, a hold); go on under a fresh anonymous one.
    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        let retry = self.terms.retry_after(&self.lock.core, error)?;
        if let Some(claim) = self.claim.take() {
            claim.forget();
        }
        Some(retry)
    }

    async fn give_up(&mut self) {
        if let Some(claim) = self.claim.take() {
            claim.withdraw().await;
        }
    }
}

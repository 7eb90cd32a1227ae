//! The fair lock: waiters take the lock in the order they came, across processes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod attempt;
pub(crate) mod calls;
pub(crate) mod family;
pub(crate) mod keys;
pub(crate) mod scripts;

use crate::base::guard::Guard;
use crate::base::handle_options::{handle_options, waiting_methods};
use crate::base::status::LockStatus;
use crate::engine::acquire::{Terms, acquire_measured};
use crate::engine::attempt::attempt;
use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::context::Core;
use crate::engine::deadlock_check::WaitsFor;
use crate::engine::place::Place;
use crate::engine::wait::{Acquisition, Step, Wait, wait_for};
use crate::engine::wakeup::{Handed, Ticket};
use crate::engine::watchdog::renewal_period;
use crate::error::{Error, Result};
use crate::fair_lock::attempt::FairCall;
use crate::fair_lock::calls::{self as fair, FairReply, PlaceTimes};
use crate::fair_lock::family::FairFamily;
use crate::fair_lock::keys::FairKeys;
use crate::lease_clock::LeaseInstant;
use crate::scripts::acquired::Acquired;
use crate::settings::{RetryPolicy, limits};

/// Default place lease of [`FairLock`] and of waiting writers of a
/// [`ReadWriteLock`](crate::ReadWriteLock): how long a waiter's place is kept
/// without a sign of life from it. Live waiters renew theirs every third of
/// it; a waiter that died is skipped at most about 1⅓ place leases later.
pub(crate) const DEFAULT_PLACE_LEASE: Duration = Duration::from_secs(5);

/// How long to wait before re-checking a lock that has no expiry.
const NO_EXPIRY_RECHECK: Duration = Duration::from_secs(1);

/// A fair lock: Redisson's `RFairLock`, in Rust. Waiters, in every process,
/// get the lock in the order they started waiting.
///
/// Everything else is as for [`Lock`](crate::Lock): acquires return a
/// [`Guard`] (fencing token, [`lost`](Guard::lost), re-entry, release on
/// drop), the watchdog renews it, owners are anonymous unless named with
/// [`FairLock::with_owner`].
///
/// # Order
///
/// A waiter that finds the lock held joins a line in Redis and parks. The
/// release wakes exactly the first waiter in line (a message on its own
/// channel); a redlatch waiter with an anonymous owner and a lease at least
/// its place lease long is handed the lock in the release itself (the hold
/// written to it, its fencing token in the message), so it holds the lock
/// without another call; nobody else may take the lock while someone waits, so a new
/// acquire never overtakes the line, and [`FairLock::try_acquire`] fails
/// while anyone waits.
///
/// Places are dated as Redisson dates them, so Java and Rust waiters share
/// one line: a newcomer's deadline is the one of the waiter before it (or
/// the holder's remaining lease) plus the wait time W
/// ([`Settings::fair_lock_wait_timeout`](crate::Settings::fair_lock_wait_timeout),
/// Redisson's `fairLockWaitTimeout`, 5 minutes; an acquire with a timeout
/// uses its timeout, as Redisson's `tryLock(waitTime, …)` does). Each
/// acquisition, and each waiter giving up, moves those behind W closer. The
/// first waiter is dropped once its deadline passes.
///
/// A redlatch waiter also gives a sign of life at each attempt, kept where
/// Redisson never looks: its place lease ([`FairLock::DEFAULT_PLACE_LEASE`](crate::FairLock::DEFAULT_PLACE_LEASE), 5 s, see
/// [`FairLock::with_place_lease`]), renewed every third of it. A redlatch
/// waiter that dies (crash, kill -9, lost network) stops renewing, and is
/// dropped once it is first and its sign of life ran out: it delays the line
/// by about one place lease and a third, not W. A Redisson waiter that dies
/// is dropped at its deadline, by Redisson's rule.
///
/// # Keys
///
/// Redisson's `RFairLock` layout: the lock hash `PREFIX+NAME` (the reentrant
/// lock's, so [`Lock`](crate::Lock)s and Redisson `RLock`s of the same name
/// exclude fair holders too), the line `redisson_lock_queue:{PREFIX+NAME}`
/// (list of owners), the deadlines `redisson_lock_timeout:{PREFIX+NAME}`
/// (zset, ms since the epoch by the server's clock), the shared fencing
/// counter (as [`Lock`](crate::Lock)'s), one channel per waiter,
/// `redisson_lock__channel:{PREFIX+NAME}:<owner>`, and redlatch's signs of
/// life `redlatch_fair_alive:{PREFIX+NAME}` (the braces as Redisson places
/// them: a name holding a `{` is used as it is).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let lock = client.fair_lock("payout:batch");
/// let guard = lock.acquire().await?;   // first come, first served
/// println!("fencing token {}", guard.token());
/// guard.release().await?;              // wakes the next waiter in line, only it
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FairLock {
    core: Arc<Core>,
    name: Arc<str>,
    owner: Option<Arc<str>>,
    place_lease: Duration,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
}

handle_options!(FairLock, "fair_lock", "acquire");
waiting_methods!(
    FairLock => Guard,
    "[`Error::Timeout`](crate::Error::Timeout)",
    "One attempt: the guard if the lock was free and nobody waited (or it re-entered), `None` otherwise. Never joins the line. One round trip.",
    "Waits in line as long as `wait` says; leaves the line when it runs out."
);

impl Primitive for FairLock {
    fn from_client(state: ClientState, name: String) -> FairLock {
        FairLock::new(state.core, name)
    }
}

impl FairLock {
    /// Default place lease of [`FairLock`] and of waiting writers of a
    /// [`ReadWriteLock`](crate::ReadWriteLock): how long a waiter's place is kept
    /// without a sign of life from it. Live waiters renew theirs every third of
    /// it; a waiter that died is skipped at most about 1⅓ place leases later.
    pub const DEFAULT_PLACE_LEASE: Duration = DEFAULT_PLACE_LEASE;

    pub(crate) fn new(core: Arc<Core>, name: String) -> FairLock {
        FairLock {
            core,
            name: Arc::from(name),
            owner: None,
            place_lease: DEFAULT_PLACE_LEASE,
            lease: None,
        }
    }
}

impl FairLock {
    /// The same lock with another place lease: how long a redlatch waiter's
    /// place in line is kept without a sign of life (see [`FairLock`]).
    /// Shorter skips dead waiters sooner and costs more renewals while waiting. Checked when
    /// the lock is used: [`Error::InvalidDuration`] unless 30 ms ≤ `lease` ≤ 30 days.
    pub fn with_place_lease(mut self, lease: Duration) -> FairLock {
        self.place_lease = lease;
        self
    }

    /// Waits in line until the lock is held, then returns its guard, or for
    /// at most the client's [`wait_timeout`](crate::Settings::wait_timeout)
    /// when it is set (none by default); the watchdog renews it until the
    /// guard goes (unless [`FairLock::with_lease`]).
    ///
    /// One round trip when the lock is free and nobody waits. Otherwise the
    /// call joins the line, subscribes to its own channel, reads the line's
    /// head and the lock's PTTL (one round trip, no script; it attempts
    /// again instead when it is first and the lock free), and parks until
    /// its turn comes (a message from the release), the holder's lease ends
    /// (when first in line), or its place needs renewing (a third of the
    /// place lease); each wake-up costs one round trip, except a hand-off
    /// (see [`FairLock`], "Order"): the guard comes with the message. A
    /// handed hold's lease counts from the waiter's last call before it.
    ///
    /// Touches the lock hash, the line, the place deadlines, the hand-off
    /// terms, the counter.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidOwner`], [`Error::InvalidDuration`],
    /// [`Error::WrongType`], [`Error::Unavailable`], [`Error::ResponseTimeout`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the line at once (a script call from a task
    /// of its own) and wakes whoever is first after it if the lock is free;
    /// an attempt in flight completes and gives back a hold it took, and a
    /// hold handed over that no guard took yet is given back (passed on)
    /// by the same call. Nothing of the waiter remains in Redis.
    pub fn acquire(&self) -> impl Future<Output = Result<Guard>> + Send + '_ {
        self.acquire_within(self.core.current_settings().wait_timeout)
    }

    /// A consistent snapshot of the lock: holders, remaining lease, last
    /// fencing token, and the waiting line ([`LockStatus::line`]: owner
    /// fields oldest first, waiters whose place ran out left out).
    ///
    /// Two round trips: one script, so the parts agree, then PUBSUB NUMSUB.
    /// Reads the lock hash, its fencing counter, the line and the place
    /// deadlines; writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// let lock = client.fair_lock("report");
    /// let guard = lock.acquire().await?;
    /// let status = lock.status().await?;
    /// assert_eq!(status.holders.len(), 1);
    /// assert!(status.line.is_empty());
    /// guard.release().await?;
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

    async fn acquire_waiting(&self, wait: Wait) -> Result<Option<Guard>> {
        let span = tracing::debug_span!("redlatch.fair_acquire", lock = %self.name);
        acquire_measured(span, self.wait_for_turn(wait)).await
    }

    async fn wait_for_turn(&self, wait: Wait) -> Result<Option<Guard>> {
        let core = &self.core;
        let settings = core.current_settings();
        let keys = Arc::new(
            FairKeys::new(&settings.key_prefix, &self.name)?
                .per_name_counter(settings.per_name_token_counters)
                .checked_for(&core.conn)?,
        );
        let terms = Terms::choose(core, self.owner.as_deref(), self.lease)?;
        let place_ms = match wait {
            Wait::Once => 0,
            _ => limits::watchdog_lease_millis("place lease", self.place_lease)?,
        };
        // Redisson dates places with the acquire's own wait when it has one.
        // A wait is never refused for its length, as no other primitive's
        // is: one below a millisecond dates as one, one past the longest
        // lease as an unbounded wait does.
        let wait_ms = match wait {
            Wait::For(timeout) if !timeout.is_zero() && timeout <= limits::MAX_LEASE => {
                limits::lease_millis("wait", timeout.max(limits::MIN_LEASE))?
            }
            _ => limits::lease_millis("fair lock wait timeout", settings.fair_lock_wait_timeout)?,
        };
        let times = PlaceTimes {
            lease_ms: terms.lease_ms,
            wait_ms,
            place_ms,
            hand_off_ms: hand_off_ms(&terms, place_ms),
        };
        let mut acquisition = FairAcquisition {
            lock: self,
            keys,
            terms,
            times,
            place: None,
            handed: None,
            waiting: None,
        };
        wait_for(&mut acquisition, wait).await
    }
}

/// The shortest place lease a waiter takes hand-offs with: its guard
/// counts the handed lease from its last attempt, up to a third of the
/// place lease before the hand-off.
const HAND_OFF_MIN_PLACE_MS: u64 = 1_000;

/// The first lease of a hold a release hands to a waiter under `terms`
/// (the release writes the hold to it and publishes its token, so the
/// waiter holds the lock without another call); 0: none, it is woken and
/// takes the lock itself. Only an anonymous owner: unique to one acquire,
/// a hold it has before taking one is the handed one, and the one future
/// that can take it gives it back when dropped. A renewed hold is handed
/// for the place lease (a waiter dead since its last sign of life blocks
/// the line no longer than that; a live one's watchdog renews it at once),
/// a fixed lease for itself. The guard counts it from the waiter's last
/// attempt before the hand-off, up to a third of the place lease earlier:
/// the lease must be at least the place lease, and that at least
/// [`HAND_OFF_MIN_PLACE_MS`].
fn hand_off_ms(terms: &Terms, place_ms: u64) -> u64 {
    if terms.named || place_ms < HAND_OFF_MIN_PLACE_MS || terms.lease_ms < place_ms {
        return 0;
    }
    if terms.renewed {
        place_ms
    } else {
        terms.lease_ms
    }
}

/// The fair lock's acquire, as the wait loop drives it: each attempt takes
/// the lock or keeps this owner's place in line; wake-ups come on the
/// owner's own channel when it is first in line.
struct FairAcquisition<'a> {
    lock: &'a FairLock,
    keys: Arc<FairKeys>,
    terms: Terms,
    times: PlaceTimes,
    /// The place this owner holds in line, left when dropped.
    place: Option<Place<FairCall>>,
    /// Where a hold a release hands to this owner arrives (its channel's).
    handed: Option<Handed>,
    /// The last attempt that found this owner waiting: when it left, and
    /// the fencing counter it read. A hand-off whose token is above that
    /// counter was written after the attempt ran, so its lease counts from
    /// when the attempt left; one at or below it was written before, and
    /// had lapsed by then (the attempt found no hold): it is dropped.
    waiting: Option<(LeaseInstant, u64)>,
}

impl FairAcquisition<'_> {
    fn call(&self) -> FairCall {
        FairCall {
            keys: self.keys.clone(),
            owner: self.terms.owner.clone(),
            named: self.terms.named,
            times: self.times,
        }
    }

    /// The guard of a hold taken by an attempt or handed over; the owner is
    /// out of the line either way.
    fn done(&mut self, acquired: Acquired) -> Step<Guard> {
        if let Some(place) = self.place.take() {
            place.forget();
        }
        let core = &self.lock.core;
        let guard = Guard::register(
            core,
            self.keys.lock.clone(),
            Arc::new(FairFamily(self.keys.clone())),
            self.terms.owner.clone(),
            &self.terms,
            acquired,
        );
        Step::Done {
            value: guard,
            more_left: false,
        }
    }

    /// The hold a release handed to this owner since it last looked, if
    /// any. Its lease (the hand-off's) counts from the last attempt that
    /// found this owner waiting, sent before the release wrote it (its
    /// token is above the counter that attempt read); the guard's start is
    /// moved back so that the client's lease ends there too (the watchdog
    /// then renews a short hand-off lease at once). Only while half the
    /// handed lease is left: a hand-off read later is checked by an attempt.
    fn hand_off(&mut self) -> Option<Acquired> {
        let token = self.handed.as_ref()?.take()?;
        let (since, counter) = self.waiting?;
        if token <= counter {
            // Written before that attempt ran, and lapsed by then.
            return None;
        }
        if since.elapsed() >= Duration::from_millis(self.times.hand_off_ms / 2) {
            // Read late (a task polled again only now): the handed hold may
            // have run out and the lock gone to someone else. The attempt
            // takes the hold if it is still this owner's (its lease counted
            // again from now), or waits in line again.
            return None;
        }
        let shorter = self.terms.lease_ms.saturating_sub(self.times.hand_off_ms);
        Some(Acquired {
            token,
            reentered: false,
            sent_at: since - Duration::from_millis(shorter),
        })
    }
}

impl Acquisition for FairAcquisition<'_> {
    type Output = Guard;

    async fn attempt(&mut self) -> Result<Step<Guard>> {
        if let Some(acquired) = self.hand_off() {
            // Handed over by the release that woke us: no call to make.
            return Ok(self.done(acquired));
        }
        let core = &self.lock.core;
        let sent = LeaseInstant::now();
        match attempt(core, self.call()).await? {
            // The script took this owner out of the line (or found the
            // hold handed to it).
            FairReply::Acquired(acquired) => Ok(self.done(acquired)),
            FairReply::Waiting {
                pttl_ms,
                first,
                counter,
            } => {
                self.waiting = Some((sent, counter));
                if self.times.place_ms > 0 && self.place.is_none() {
                    self.place = Some(Place::new(core.clone(), self.call()));
                }
                // Try again before the sign of life runs out...
                let mut retry_in = renewal_period(self.times.place_ms);
                if first {
                    // ...and, first in line, when the holder's lease ends.
                    let lease_left =
                        u64::try_from(pttl_ms).map_or(NO_EXPIRY_RECHECK, Duration::from_millis);
                    retry_in = retry_in.min(lease_left);
                }
                Ok(Step::Busy { retry_in })
            }
        }
    }

    /// The channel is this owner's own: the release names who is next,
    /// and a hand-off's token comes on it.
    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        Some(WaitsFor {
            core: &self.lock.core,
            key: &self.keys.lock.key,
            owner: &self.terms.owner,
        })
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        let channel = self.keys.waiter_channel(&self.terms.owner);
        let ticket = self.lock.core.wakeups.join(&channel);
        self.handed = Some(ticket.handed());
        Ok(vec![ticket])
    }

    /// In place of a second attempt once subscribed: a wake-up goes only to
    /// the first waiter in line while the lock is free (the release, a
    /// newcomer, a waiter leaving), so unless this owner is first and the
    /// lock free, none was missed. Two plain reads instead of the acquire
    /// script. An anonymous owner's channel is new with this acquire; a
    /// named owner's may have carried messages before: it attempts, as on a
    /// cluster or after any error.
    async fn recheck(&mut self) -> Option<Duration> {
        let core = &self.lock.core;
        if self.terms.named || self.place.is_none() || core.conn.is_cluster() {
            return None;
        }
        let mut conn = core.conn.clone();
        let limit = core.current_settings().response_timeout;
        let owner = &*self.terms.owner;
        let fair::LineHead {
            first: head,
            pttl_ms,
            holds,
        } = fair::line_head(&mut conn, &self.keys, owner, limit)
            .await
            .ok()?;
        if holds {
            // Handed over before the subscription could hear it: the
            // attempt takes the hold.
            return None;
        }
        if head.as_deref() != Some(owner) {
            // Still behind someone (or out of line: attempt to find out).
            return head.is_some().then(|| renewal_period(self.times.place_ms));
        }
        // First in line: the holder's lease end, as the attempt would say.
        let lease_left = u64::try_from(pttl_ms).ok().map(Duration::from_millis);
        match pttl_ms {
            -2 => None,
            _ => Some(
                renewal_period(self.times.place_ms).min(lease_left.unwrap_or(NO_EXPIRY_RECHECK)),
            ),
        }
    }

    /// The outcome is unknown: the attempt gives back whatever the old
    /// owner may have (a place, a hold); go on under a fresh anonymous one.
    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        let retry = self.terms.retry_after(&self.lock.core, error)?;
        if let Some(place) = self.place.take() {
            place.forget();
        }
        // A hold handed to the old owner is its undo's to give back.
        self.handed = None;
        self.waiting = None;
        Some(retry)
    }

    async fn give_up(&mut self) {
        if let Some(place) = self.place.take() {
            place.withdraw().await;
        }
    }
}

//! The reentrant lock handle and its acquire loop.

pub(crate) mod attempt;
pub(crate) mod calls;
pub(crate) mod coalesce;
pub(crate) mod courtesy;
pub(crate) mod plain_family;
pub(crate) mod scripts;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use tracing::{Instrument, field};

use crate::base::guard::Guard;
use crate::base::handle_options::{handle_options, waiting_methods};
use crate::base::keys::LockKeys;
use crate::base::request::Request;
use crate::base::status::LockStatus;
use crate::engine::acquire::{Terms, acquire_measured};
use crate::engine::attempt::attempt;
use crate::engine::context::Core;
use crate::engine::deadlock_check::WaitsFor;
use crate::engine::place::Place;
use crate::engine::wait::{Acquisition, Step, Tickets, Wait, check_queued, record_wake, wait_from};
use crate::engine::wait_edge::WaitEdge;
use crate::engine::wakeup::{Ticket, Wake};
use crate::error::{Error, Result};
use crate::lock::attempt::LockAttempt;
use crate::lock::calls::{LockReply, PRECEDENCE_AFTER, PRECEDENCE_KEEP};
use crate::lock::plain_family::PlainFamily;
use crate::settings::RetryPolicy;

/// How long to wait before re-checking a lock that has no expiry (someone
/// PERSISTed it or set it without a lease): there is no lease end to wait for.
const NO_EXPIRY_RECHECK: Duration = Duration::from_secs(1);

/// How often a releasing client stepping aside looks whether another client
/// has taken the lock (about a hand-off between processes on one machine).
const COURTESY_LOOK: Duration = Duration::from_micros(250);

/// A releasing client stops stepping aside once the lock has stayed free for
/// this share of the grace (a tenth: 500 µs of the default 5 ms, a few
/// hand-offs between processes on one machine).
const COURTESY_FREE_SHARE: u32 = 10;

/// A handle to one named lock: Redisson's reentrant `RLock`, in Rust.
///
/// Cheap to create and clone; it holds nothing by itself. Each successful
/// acquire returns a [`Guard`], which holds the lock until released or dropped.
///
/// # Owners and reentrancy
///
/// Every acquisition has an owner, written to Redis as `<client-id>:<owner>`.
/// By default each acquisition gets a fresh anonymous owner, so two acquires
/// always exclude each other, even from the same task, like `tokio::sync::Mutex`.
/// Re-enter explicitly with [`Guard::reenter`], or name the owner with
/// [`Lock::with_owner`] (a request id, say): acquires by the same named owner
/// on the same client re-enter (hold count + 1, same fencing token) instead of
/// waiting. Each hold is given back by releasing or dropping its guard; the
/// last one deletes the lock and wakes a waiter.
///
/// # Keys
///
/// `PREFIX+NAME` (hash: owner → hold count and `redlatch_token` → `t` and
/// the hold's token, with PEXPIRE), the fencing counter shared by every lock
/// (`redlatch_lock_token`; see [`Settings::per_name_token_counters`](crate::Settings::per_name_token_counters)) and the channel
/// `redisson_lock__channel:{PREFIX+NAME}`: the layout of Redisson's `RLock`,
/// so Java services using Redisson and Rust services using redlatch exclude
/// each other on the same name.
///
/// ```no_run
/// # async fn demo(client: redlatch::Client) -> redlatch::Result<()> {
/// use std::time::Duration;
///
/// let lock = client.lock("voucher:7:user:42");
/// match lock.acquire_within(Some(Duration::from_millis(200))).await {
///     Ok(guard) => {
///         // guard.token() goes along with every write the lock protects
///         guard.release().await?;
///     }
///     Err(redlatch::Error::Timeout { .. }) => { /* busy: tell the user to retry */ }
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    core: Arc<Core>,
    /// The client's lock state: coalesced calls, the hand-off courtesy.
    family: Arc<PlainFamily>,
    name: Arc<str>,
    owner: Option<Arc<str>>,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
    /// The keys, made at the first acquire under the key prefix they were
    /// made with: later acquires under the same prefix reuse them (no
    /// allocation). The prefix is a live setting, so it is compared each time.
    keys: std::sync::OnceLock<(Box<str>, LockKeys)>,
}

handle_options!(Lock, "lock", "acquire");
waiting_methods!(
    Lock => Guard,
    "[`Error::Timeout`](crate::Error::Timeout)",
    "One attempt: the guard if the lock was free (or re-entered), `None` if another owner holds it, or if it is free but a waiter that has waited longer claimed its next turn (then for 200 ms at most: this refusal cuts the claim to that; docs/SAFETY.md, invariant (g)). One round trip.",
    "Waits for the lock as long as `wait` says (Redisson's `tryLock(wait, lease)`, with the lease on the handle)."
);

impl Lock {
    pub(crate) fn new(core: Arc<Core>, family: Arc<PlainFamily>, name: String) -> Lock {
        Lock {
            core,
            family,
            name: Arc::from(name),
            owner: None,
            lease: None,
            keys: std::sync::OnceLock::new(),
        }
    }

    /// Waits until the lock is held, then returns its guard, or for at most
    /// the client's [`wait_timeout`](crate::Settings::wait_timeout) when it
    /// is set (none by default: until held), so operators tune waits from a
    /// settings file without a code change. The lease is the client's
    /// default, renewed by the watchdog until the guard goes, or the
    /// handle's fixed one ([`Lock::with_lease`]).
    ///
    /// Costs one round trip when the lock is free. When it is held, the call
    /// joins the lock's channel and parks until an unlock message, the end of
    /// the holder's lease, or a reconnect of the subscription; each wake-up
    /// costs one round trip. Waiters of one client are woken one at a time,
    /// oldest first, and a new acquire does not overtake them. A client whose
    /// release just woke waiters in other processes lets them go first: its
    /// next acquire of the lock waits [`Settings::handoff_grace`](crate::Settings::handoff_grace)
    /// (5 ms) before trying.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidOwner`], [`Error::InvalidDuration`],
    /// [`Error::WrongType`], [`Error::Unavailable`], [`Error::ResponseTimeout`];
    /// [`Error::Timeout`] when the client's wait timeout ran out (see
    /// [`Lock::acquire_within`]).
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting and leaves nothing behind: an attempt
    /// in flight completes and, if it took the lock, gives it back at once; the
    /// subscription is dropped when its last waiter leaves.
    pub fn acquire(&self) -> impl Future<Output = Result<Guard>> + Send + '_ {
        self.acquire_within(self.core.current_settings().wait_timeout)
    }

    /// Deletes the lock whoever holds it, and wakes its waiters. Returns
    /// whether a lock was deleted. Guards of this client on the lock are
    /// marked lost at once; other clients' guards find out at their next renewal.
    ///
    /// One round trip. Touches `PREFIX+NAME` and publishes on its channel.
    ///
    /// # Errors
    /// [`Error::WrongType`] (the key is left alone), [`Error::OutcomeUnknown`]
    /// (sent, no reply: the lock may or may not have been deleted), other
    /// connection errors (not deleted).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let keys = self.keys()?;
        let core = &self.core;
        // Before sending: the loss watch may read the key gone before the
        // reply comes, and must know whose doing it was.
        let _unlocking = core.watchdog.force_unlocking(&keys.key);
        let mut conn = core.conn.clone();
        let mut call = crate::base::scripts::FORCE_UNLOCK.call(&conn);
        call.key(&keys.key)
            .later_key(keys.token_name())
            .arg(keys.channel())
            .arg(conn.publish_command());
        let limit = core.current_settings().response_timeout;
        let (reply, token): (i64, i64) = call
            .run(&mut conn, "force unlock", limit)
            .instrument(tracing::debug_span!("redlatch.force_unlock", lock = %keys.key))
            .await
            .map_err(|error| error.unknown_outcome("force unlock"))?;
        match reply {
            1 => {
                // Only the holds it took down: one this client took after
                // it ran (its reply read first) has a higher token.
                core.watchdog
                    .mark_key_lost(&keys.key, u64::try_from(token).ok());
                Ok(true)
            }
            0 => Ok(false),
            -1 => Err(Error::WrongType {
                key: keys.key.to_string(),
            }),
            other => Err(Error::Protocol {
                op: "force unlock",
                detail: other.to_string(),
            }),
        }
    }

    /// A consistent snapshot of the lock: holders and their hold counts,
    /// remaining lease, last fencing token handed out; and how many client
    /// connections are subscribed to its channel (processes with waiters).
    /// The name may also be a [`FairLock`](crate::FairLock) (its waiting
    /// line is in [`LockStatus::line`]) or a
    /// [`ReadWriteLock`](crate::ReadWriteLock) ([`LockStatus::mode`]); a
    /// [`TokenLock`](crate::TokenLock)'s string is [`Error::WrongType`]
    /// ([`TokenLock::status`](crate::TokenLock::status) reads it).
    ///
    /// Two round trips: one script, so the lock's parts agree, then PUBSUB
    /// NUMSUB. Reads the lock hash, its fencing counter, the fair lock's line
    /// and place deadlines; writes nothing.
    ///
    /// # Errors
    /// [`Error::WrongType`], connection errors.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn status(&self) -> Result<LockStatus> {
        crate::base::status::read(&self.core, &self.name).await
    }

    fn keys(&self) -> Result<LockKeys> {
        let settings = self.core.current_settings();
        LockKeys::of_name(&settings.key_prefix, &self.name)?
            .per_name_counter(settings.per_name_token_counters)
            .checked_for(&self.core.conn)
    }

    /// Builds the request: checks the name, owner and lease.
    fn request(&self, lease: Option<Duration>) -> Result<(Request, Terms)> {
        let core = &self.core;
        let keys = self.shared_keys()?;
        let terms = Terms::choose(core, self.owner.as_deref(), lease)?;
        Ok((Request::of(keys, &terms), terms))
    }

    /// The lock's keys under the current key prefix, made once per handle
    /// and prefix.
    fn shared_keys(&self) -> Result<LockKeys> {
        let settings = self.core.current_settings();
        if let Some((prefix, keys)) = self.keys.get()
            && **prefix == *settings.key_prefix
        {
            return Ok(keys.clone());
        }
        let keys = self.keys()?;
        // The first prefix seen is kept; another one (changed live) is
        // rebuilt at each acquire, which is correct, only slower.
        let _ = self
            .keys
            .set((Box::from(settings.key_prefix.as_str()), keys.clone()));
        Ok(keys)
    }

    async fn acquire_waiting(&self, wait: Wait) -> Result<Option<Guard>> {
        // Made here and lent to the wait: moved into an `async fn`, it would
        // take its room twice in every parked waiter (the argument's and
        // the local's).
        let mut acquisition = {
            let (request, terms) = self.request(self.lease)?;
            LockAcquisition {
                lock: self,
                request,
                renewed: terms.renewed,
                started: LeaseInstant::now(),
                claimed: None,
            }
        };
        let span = tracing::debug_span!(
            "redlatch.acquire",
            lock = %acquisition.request.keys.key,
            token = field::Empty,
        );
        acquire_measured(span, self.wait_for_hold(&mut acquisition, wait)).await
    }

    /// Steps aside (the hand-off courtesy) until `until`, until another
    /// client has taken the lock (this acquire then waits in line like any
    /// other), or until the lock has stayed free for a tenth of the grace
    /// (nobody is coming: every other contender may be stepping aside too).
    /// Ending early matters: with every client stepping aside after each of
    /// its releases, a fixed pause left the lock free until a pause ended (a
    /// hand-off p99 of 2.5 ms across 4 processes, docs/BENCHMARKS.md). Looks
    /// every [`COURTESY_LOOK`] at most; a failed look ends the courtesy (the
    /// acquire's own attempt then reports the fault).
    async fn step_aside(&self, request: &Request, until: LeaseInstant) {
        let mut conn = self.core.conn.clone();
        let settings = self.core.current_settings();
        let started = LeaseInstant::now();
        let free_for = settings.handoff_grace / COURTESY_FREE_SHARE;
        let look_every = COURTESY_LOOK
            .min(free_for / 2)
            .max(Duration::from_micros(50));
        loop {
            let now = LeaseInstant::now();
            let left = until.saturating_duration_since(now);
            if left.is_zero() || now.saturating_duration_since(started) >= free_for {
                return;
            }
            tokio::time::sleep(left.min(look_every)).await;
            // A look never outlasts the courtesy (nor, so, the caller's wait):
            // a stalled server ends it, and the attempt reports the fault.
            let limit = settings
                .response_timeout
                .min(until.saturating_duration_since(LeaseInstant::now()))
                .max(COURTESY_LOOK);
            if !matches!(
                crate::lock::calls::is_taken(&mut conn, &request.keys, limit).await,
                Ok(false)
            ) {
                return;
            }
        }
    }

    /// The lock's wait: the prelude ([`Lock::queue_up`]), then the wait loop.
    ///
    /// A plain function around an `async` block, the prelude in its own
    /// future: an `async fn` keeps its arguments twice, and the prelude's
    /// locals (a borrowed local lives to its scope's end) took room in
    /// the parked waiter's state.
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice in a parked waiter"
    )]
    fn wait_for_hold<'a>(
        &'a self,
        acquisition: &'a mut LockAcquisition<'_>,
        wait: Wait,
    ) -> impl Future<Output = Result<Option<Guard>>> + 'a {
        async move {
            let mut edge = None;
            let (tickets, woken, seen_held) = self.queue_up(acquisition, wait, &mut edge).await?;
            let started = acquisition.started;
            wait_from(
                acquisition,
                wait,
                started,
                tickets,
                (woken, seen_held),
                edge,
            )
            .await
        }
    }

    /// Before the wait loop: re-entry, the hand-off courtesy, or joining
    /// this client's waiters already queued. Returns the channel
    /// memberships made, whether a message ended the first park, and
    /// whether the lock was seen held (see [`wait_from`]); a waiter that
    /// queues checks for a deadlock first, its edge in `edge`
    /// ([`check_queued`]).
    async fn queue_up(
        &self,
        acquisition: &mut LockAcquisition<'_>,
        wait: Wait,
        edge: &mut Option<Box<WaitEdge>>,
    ) -> Result<(Tickets, bool, bool)> {
        let core = &self.core;
        let started = acquisition.started;
        let request = &acquisition.request;
        let deadline = wait.deadline(started);
        let remaining = |now: LeaseInstant| {
            deadline.map_or(Duration::MAX, |at| at.saturating_duration_since(now))
        };
        let mut tickets = Tickets::None;
        // The first park ended with an unlock message.
        let mut woken = false;
        // Queued behind a waiter of this client, which found the lock held.
        let mut seen_held = false;
        // A named owner that holds the lock re-enters at once (invariant
        // (e)): it neither steps aside nor queues behind waiters for a lock
        // it holds.
        let reenters =
            request.named_owner && core.watchdog.holds(&request.keys.key, &request.owner);
        if wait != Wait::Once && !reenters {
            let courtesy = self.family.courtesy.step_aside_until(&request.keys.key);
            // Joined in a statement of its own, into `tickets`: the channel's
            // name (a temporary of the condition) and the joined ticket would
            // otherwise take room through the park below.
            let mut lease_ends = None;
            if courtesy.is_none()
                && let Some((queued, ends)) = core.wakeups.join_queue(&request.keys.channel())
            {
                tickets = Tickets::One(queued);
                lease_ends = Some(ends);
            }
            if let Some(until) = courtesy {
                // We just released this lock to waiters elsewhere: let one of them
                // have it. Stay subscribed meanwhile, so that whoever takes it
                // sees us listening and steps aside for us in turn. A plain
                // sleep, not a park: the first unlock message would be our own.
                let joined = core.wakeups.join(&request.keys.channel());
                // Boxed: rare, and a parked waiter would carry its room.
                Box::pin(self.step_aside(request, until.min(deadline.unwrap_or(until)))).await;
                tickets = Tickets::One(joined);
            } else if let Some(lease_ends) = lease_ends {
                // Waiters of this client are already queued: join them rather than barge in.
                let now = LeaseInstant::now();
                let limit = lease_ends
                    .saturating_duration_since(now)
                    .min(remaining(now));
                // It waits, as a busy attempt's waiter does: the cycle it
                // would close is refused now, else its edge is written.
                // Boxed: a parked waiter would carry its room. Nothing at
                // all with detection off.
                let limit = if core.deadlock_detection {
                    Box::pin(check_queued(acquisition, wait, started, limit, edge)).await?
                } else {
                    limit
                };
                let queued = &tickets[0];
                let (epoch, seen) = (queued.epoch(), queued.messages());
                crate::engine::metrics::contended_wait();
                let wake = queued.park(epoch, seen, limit, false).await;
                record_wake(wake);
                woken = wake == Wake::Message;
                seen_held = true;
            }
        }
        Ok((tickets, woken, seen_held))
    }
}

/// The reentrant lock's acquire, as the wait loop drives it.
struct LockAcquisition<'a> {
    lock: &'a Lock,
    request: Request,
    /// The watchdog renews the hold. The request keeps the rest of the
    /// acquire's [`Terms`]: kept whole, the owner and lease took room twice
    /// in every parked waiter.
    renewed: bool,
    /// When the caller's call began: its wait, once past
    /// [`PRECEDENCE_AFTER`], claims the lock's next turn.
    started: LeaseInstant,
    /// This owner's claim to the next turn while it stands, withdrawn if
    /// the acquire gives up or is dropped. Boxed: most waiters never claim,
    /// and every parked waiter would carry its room.
    claimed: Option<Box<Place<LockAttempt>>>,
}

impl LockAcquisition<'_> {
    /// The terms the request was made on.
    fn terms(&self) -> Terms {
        Terms {
            owner: self.request.owner.clone(),
            named: self.request.named_owner,
            lease_ms: self.request.lease_ms,
            renewed: self.renewed,
        }
    }
}

impl Acquisition for LockAcquisition<'_> {
    type Output = Guard;

    async fn attempt(&mut self) -> Result<Step<Guard>> {
        let core = &self.lock.core;
        let waited = self.started.elapsed();
        self.request.waited_ms = if waited >= PRECEDENCE_AFTER {
            waited.as_millis() as u64
        } else {
            0
        };
        let request = &self.request;
        let reply = attempt(core, self.lock.attempt(request)).await?;
        if let LockReply::Acquired(_) = reply
            && let Some(claim) = self.claimed.take()
        {
            // Taking the lock took the claim out in the same script.
            claim.forget();
        }
        match reply {
            LockReply::Acquired(acquired) => {
                let guard = Guard::register(
                    core,
                    request.keys.clone(),
                    self.lock.family.clone(),
                    request.owner.clone(),
                    &self.terms(),
                    acquired,
                );
                Ok(Step::Done {
                    value: guard,
                    more_left: false,
                })
            }
            LockReply::Held { pttl_ms, first } => {
                let mut retry_in =
                    u64::try_from(pttl_ms).map_or(NO_EXPIRY_RECHECK, Duration::from_millis);
                if !first && let Some(claim) = self.claimed.take() {
                    // A longer waiter's claim replaced ours.
                    claim.forget();
                }
                if first {
                    // Try again before the claim lapses.
                    retry_in = retry_in.min(PRECEDENCE_KEEP / 3);
                    if self.claimed.is_none() {
                        self.claimed = Some(Box::new(Place::new(
                            core.clone(),
                            self.lock.attempt(request),
                        )));
                    }
                }
                Ok(Step::Busy { retry_in })
            }
        }
    }

    async fn give_up(&mut self) {
        if let Some(claim) = self.claimed.take() {
            claim.withdraw().await;
        }
    }

    fn goes_first(&self) -> bool {
        self.claimed.is_some()
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(vec![
            self.lock.core.wakeups.join(&self.request.keys.channel()),
        ])
    }

    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        Some(WaitsFor {
            core: &self.lock.core,
            key: &self.request.keys.key,
            owner: &self.request.owner,
        })
    }

    /// Connection errors are retried for anonymous owners only, each retry
    /// under a fresh owner: the attempt it replaces may still be giving back
    /// a hold under the old one.
    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        let mut terms = self.terms();
        let retry = terms.retry_after(&self.lock.core, error)?;
        // The old owner's claim is withdrawn; the fresh one claims anew.
        self.claimed = None;
        self.request.owner = terms.owner;
        Some(retry)
    }
}

impl Lock {
    /// The reentrant lock's acquire and release scripts exactly as the
    /// library loads them on one server (shared parts in front): for tools
    /// that send them by themselves, such as the benchmark harness's
    /// `redis-benchmark` limit. Not a stable interface.
    #[doc(hidden)]
    pub fn script_sources() -> (&'static str, &'static str) {
        scripts::lock_script_sources()
    }

    /// One acquire of `request`, coalesced with the client's others.
    pub(crate) fn attempt(&self, request: &Request) -> LockAttempt {
        let coalesced = self.family.calls.as_ref();
        LockAttempt(
            request.clone(),
            coalesced.map(|calls| calls.acquire.clone()),
        )
    }

    /// The client this handle was made from (multi-locks span several).
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The Redis key of the lock (prefix included): the multi-lock's sort key.
    pub(crate) fn redis_key(&self) -> Result<String> {
        Ok(self.keys()?.key.to_string())
    }
}

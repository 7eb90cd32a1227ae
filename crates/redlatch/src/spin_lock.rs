//! The spin lock: the reentrant lock without pub/sub. A waiter polls with a
//! growing back-off instead of subscribing, as Redisson's `RSpinLock` does:
//! for deployments where subscriptions are costly (very many waiting
//! clients, a proxy without pub/sub). Same keys and scripts as [`Lock`](crate::Lock), so the
//! two exclude each other.
//!
//! It is also the proof that a primitive plugs into the engine from its own
//! file: the wait loop, the attempt and its undo policy, the acquire
//! prologue, the guard and the watchdog are the engine's and the reentrant
//! lock's, reused; this file only says how its waiter waits.

use std::sync::Arc;
use std::time::Duration;

use crate::base::guard::Guard;
use crate::base::handle_options::{handle_options, waiting_methods};
use crate::base::keys::LockKeys;
use crate::base::request::Request;
use crate::base::status::LockStatus;
use crate::engine::acquire::{Terms, acquire_measured};
use crate::engine::attempt::attempt;
use crate::engine::context::Core;
use crate::engine::deadlock_check::WaitsFor;
use crate::engine::wait::{Acquisition, Step, Wait, wait_for};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, Result};
use crate::lock::attempt::{AcquireCalls, LockAttempt};
use crate::lock::calls::LockReply;
use crate::lock::plain_family::PlainFamily;
use crate::settings::RetryPolicy;

/// A lock whose waiters poll rather than subscribe: Redisson's `RSpinLock`.
///
/// Acquires return the same [`Guard`] as [`Lock`](crate::Lock) (fencing
/// token, re-entry, watchdog renewal, release on drop) on the same keys. A
/// waiter tries again after a back-off that doubles from
/// [`SpinLock::DEFAULT_BACKOFF`]'s first delay (1 ms) up to its longest
/// (128 ms), and never later than the holder's lease end. It costs one
/// round trip per try and no subscription.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let lock = client.spin_lock("inventory");
/// let guard = lock.acquire().await?;
/// assert!(lock.try_acquire().await?.is_none()); // another owner spins
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct SpinLock {
    core: Arc<Core>,
    /// The client's lock state: coalesced calls.
    family: Arc<PlainFamily>,
    name: Arc<str>,
    owner: Option<Arc<str>>,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
    backoff: RetryPolicy,
}

handle_options!(SpinLock, "spin_lock", "acquire");
waiting_methods!(
    SpinLock => Guard,
    "[`Error::Timeout`]",
    "One try: the guard, or `None` when another owner holds it. One round trip.",
    "Tries for as long as `wait` says."
);

impl SpinLock {
    /// The back-off between tries: 1 ms, doubling, at most 128 ms.
    pub const DEFAULT_BACKOFF: RetryPolicy = RetryPolicy {
        attempts: u32::MAX,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(128),
    };

    pub(crate) fn new(core: Arc<Core>, family: Arc<PlainFamily>, name: String) -> SpinLock {
        SpinLock {
            core,
            family,
            name: Arc::from(name),
            owner: None,
            lease: None,
            backoff: SpinLock::DEFAULT_BACKOFF,
        }
    }

    /// The client's acquires under way, which an attempt leaves with.
    fn coalesced(&self) -> Option<AcquireCalls> {
        let calls = self.family.calls.as_ref();
        calls.map(|calls| calls.acquire.clone())
    }

    /// The same lock with another back-off between tries (its `attempts`
    /// are not used: a waiter tries until its wait ends).
    pub fn with_backoff(mut self, backoff: RetryPolicy) -> SpinLock {
        self.backoff = backoff;
        self
    }

    /// Tries until the lock is held, then returns its guard, or for at most
    /// the client's [`wait_timeout`](crate::Settings::wait_timeout) when it
    /// is set (none by default).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidOwner`], [`Error::InvalidDuration`],
    /// [`Error::WrongType`], [`Error::Unavailable`], [`Error::ResponseTimeout`].
    ///
    /// # Cancel safety
    /// As [`Lock::acquire`](crate::Lock::acquire): an attempt in flight
    /// completes and gives back a hold it took.
    pub fn acquire(&self) -> impl std::future::Future<Output = Result<Guard>> + Send + '_ {
        self.acquire_within(self.core.current_settings().wait_timeout)
    }

    /// The lock's holders, lease and last token, as [`Lock::status`](crate::Lock::status).
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
        let core = &self.core;
        let settings = core.current_settings();
        let keys = LockKeys::of_name(&settings.key_prefix, &self.name)?
            .per_name_counter(settings.per_name_token_counters)
            .checked_for(&core.conn)?;
        let terms = Terms::choose(core, self.owner.as_deref(), self.lease)?;
        let mut spinning = Spinning {
            lock: self,
            request: Request::of(keys, &terms),
            terms,
            tries: 0,
        };
        let span = tracing::debug_span!("redlatch.spin_acquire", lock = %self.name);
        acquire_measured(span, wait_for(&mut spinning, wait)).await
    }
}

/// A spin lock's acquire, as the wait loop drives it: no channel to join,
/// so the loop sleeps each back-off out.
struct Spinning<'a> {
    lock: &'a SpinLock,
    request: Request,
    terms: Terms,
    tries: u32,
}

impl Acquisition for Spinning<'_> {
    type Output = Guard;

    async fn attempt(&mut self) -> Result<Step<Guard>> {
        let core = &self.lock.core;
        match attempt(
            core,
            LockAttempt(self.request.clone(), self.lock.coalesced()),
        )
        .await?
        {
            LockReply::Acquired(acquired) => Ok(Step::Done {
                value: Guard::register(
                    core,
                    self.request.keys.clone(),
                    self.lock.family.clone(),
                    self.request.owner.clone(),
                    &self.terms,
                    acquired,
                ),
                more_left: false,
            }),
            LockReply::Held { pttl_ms, .. } => {
                let backoff = self.lock.backoff.delay(self.tries);
                self.tries = self.tries.saturating_add(1);
                let lease_left = u64::try_from(pttl_ms).map_or(backoff, Duration::from_millis);
                Ok(Step::Busy {
                    retry_in: backoff.min(lease_left),
                })
            }
        }
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(Vec::new())
    }

    fn waits_for(&self) -> Option<WaitsFor<'_>> {
        Some(WaitsFor {
            core: &self.lock.core,
            key: &self.request.keys.key,
            owner: &self.request.owner,
        })
    }

    fn retry_after(&mut self, error: &Error) -> Option<RetryPolicy> {
        let retry = self.terms.retry_after(&self.lock.core, error)?;
        self.request.owner = self.terms.owner.clone();
        Some(retry)
    }
}

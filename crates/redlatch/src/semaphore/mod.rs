//! The counting semaphore: Redisson's `RSemaphore`, in Rust.

pub(crate) mod keys;
pub(crate) mod permit;
pub(crate) mod scripts;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::cancel::{hand_over, run_to_end, spawn_undo};
use crate::engine::context::Core;
use crate::engine::script_call::{call, send};
use crate::engine::wait::{Acquisition, Step, Wait, Wakes, wait_for};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, Result};
use crate::semaphore::keys::SemaphoreKeys;
use crate::settings::RetryPolicy;

/// How long a waiter sleeps before re-checking when no release message came:
/// a safety net against pub/sub messages lost in transit (pub/sub delivers at
/// most once), not the way waiters normally wake.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// What a permit count key should hold (for [`Error::WrongValue`]).
const COUNT: &str = "a permit count (an integer)";

/// A handle to one named counting semaphore: Redisson's `RSemaphore`, shared
/// by every process that uses the name.
///
/// Redis keeps the number of available permits. [`acquire`](Semaphore::acquire)
/// takes one permit and [`acquire_many`](Semaphore::acquire_many) several
/// (tokio's names) when enough are free, and otherwise parks until a release
/// message; the returned [`SemaphorePermit`] gives them back when released or
/// dropped, like tokio's `SemaphorePermit`. The semaphore starts with no
/// permits: set them once with [`try_set_permits`](Semaphore::try_set_permits)
/// or [`add_permits`](Semaphore::add_permits).
///
/// **A plain permit has no owner and no lease.** If its holder dies (crash,
/// `kill -9`, a network partition for good) before releasing, the permit is
/// gone for good, and so is a permit whose acquire was cut off by a broken
/// connection after Redis took it. Use
/// [`PermitSemaphore`](crate::PermitSemaphore) when permits must come back by
/// themselves.
///
/// # Keys
///
/// `PREFIX+NAME` (string: available permits) and the channel
/// `redisson_sc:{PREFIX+NAME}` (each release publishes the new count): the
/// layout of Redisson's `RSemaphore`, so Java and Rust services can share one.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let pool = client.semaphore("smtp-connections");
/// pool.try_set_permits(3).await?;              // only the first caller sets it
///
/// let permit = pool.acquire().await?;          // waits while all 3 are taken
/// assert_eq!(pool.available_permits().await?, 2);
/// drop(permit);                                // given back in the background
///
/// let two = pool.try_acquire_many(2).await?;   // one round trip, no waiting
/// assert!(two.is_some());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    core: Arc<Core>,
    name: Arc<str>,
}

impl Primitive for Semaphore {
    fn from_client(state: ClientState, name: String) -> Semaphore {
        Semaphore::new(state.core, name)
    }
}

impl Semaphore {
    pub(crate) fn new(core: Arc<Core>, name: String) -> Semaphore {
        Semaphore {
            core,
            name: Arc::from(name),
        }
    }
}

impl Semaphore {
    /// The semaphore's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the number of permits if the semaphore has none set yet, and
    /// returns whether it did. Every process can call it at start-up: the
    /// first wins. One round trip; touches `PREFIX+NAME`, publishes on the
    /// channel.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongValue`], connection errors;
    /// [`Error::OutcomeUnknown`] when the call may have set the count but no
    /// answer came (not transient: a repeat would answer `false` to the
    /// caller that set it).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set the count.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let keys = self.keys()?;
        let mut request = scripts::SEMAPHORE_TRY_SET.call(&self.core.conn);
        request
            .key(&keys.key)
            .arg(&keys.channel)
            .arg(permits)
            .arg(self.core.conn.publish_command());
        // A set or an add that may have run is no error to repeat: repeated,
        // it answers "already set" to its own setter, or adds twice.
        let reply: i64 = send(&self.core, "semaphore try_set_permits", request)
            .await
            .map_err(|error| error.unknown_outcome("semaphore try_set_permits"))?;
        match reply {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(wrong_count(&keys)),
        }
    }

    /// Adds `delta` permits (takes them away when negative) and returns the
    /// new count; waiters are woken when permits are available. The count
    /// may be below zero when a Redisson client took permits away past zero
    /// (its `addPermits` allows it); adding to it works as there, taking
    /// away below zero is refused here. One round
    /// trip; touches `PREFIX+NAME`, publishes on the channel.
    ///
    /// # Errors
    /// [`Error::InvalidPermits`] when taking away more permits than are
    /// available (the count is left alone), [`Error::InvalidName`],
    /// [`Error::WrongValue`], connection errors; [`Error::OutcomeUnknown`]
    /// when the call may have changed the count but no answer came (not
    /// transient: a repeat could add twice).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have changed the count.
    pub async fn add_permits(&self, delta: i64) -> Result<i64> {
        let keys = self.keys()?;
        let mut request = scripts::SEMAPHORE_ADD.call(&self.core.conn);
        request
            .key(&keys.key)
            .arg(&keys.channel)
            .arg(delta)
            .arg(self.core.conn.publish_command());
        let reply: Vec<i64> = send(&self.core, "semaphore add_permits", request)
            .await
            .map_err(|error| error.unknown_outcome("semaphore add_permits"))?;
        match reply.as_slice() {
            [1, count] => Ok(*count),
            [0, _] => Err(Error::InvalidPermits {
                name: self.name.to_string(),
                permits: delta,
                reason: "would leave fewer than zero permits available",
            }),
            [-1, _] => Err(wrong_count(&keys)),
            other => Err(protocol("semaphore add_permits", other)),
        }
    }

    /// The number of permits free now (0 before any are set; below zero
    /// when a Redisson client took more away than there were). One round trip;
    /// reads `PREFIX+NAME`.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongValue`], connection errors.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn available_permits(&self) -> Result<i64> {
        let keys = self.keys()?;
        let mut invocation = scripts::SEMAPHORE_AVAILABLE.prepare_invoke();
        invocation.key(&keys.key);
        let reply: Vec<i64> = call(&self.core, "semaphore available_permits", &invocation).await?;
        match reply.as_slice() {
            [1, count] => Ok(*count),
            [-1, _] => Err(wrong_count(&keys)),
            other => Err(protocol("semaphore available_permits", other)),
        }
    }

    /// Waits until a permit is free, takes it, and returns a guard that
    /// gives it back: [`acquire_many(1)`](Semaphore::acquire_many), as
    /// tokio's `Semaphore::acquire` (waiting at most the client's
    /// [`wait_timeout`](crate::Settings::wait_timeout) when it is set).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// let pool = client.semaphore("workers");
    /// pool.try_set_permits(2).await?;
    /// let permit = pool.acquire().await?;
    /// assert_eq!(permit.permits(), 1);
    /// assert_eq!(pool.available_permits().await?, 1);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub fn acquire(&self) -> impl Future<Output = Result<SemaphorePermit>> + Send + '_ {
        self.acquire_many(1)
    }

    /// One attempt at one permit: [`try_acquire_many(1)`](Semaphore::try_acquire_many).
    /// One round trip.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        self.try_acquire_many(1).await
    }

    /// Waits for one permit as long as `wait` says:
    /// [`acquire_many_within(1, wait)`](Semaphore::acquire_many_within).
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_within`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn acquire_within(&self, wait: Option<Duration>) -> Result<SemaphorePermit> {
        self.acquire_many_within(1, wait).await
    }

    /// Waits until `permits` permits are free, takes them all at once, and
    /// returns one guard that gives them back (tokio's `Semaphore::acquire_many`).
    ///
    /// One round trip when enough are free. Otherwise the call subscribes to
    /// the channel (one subscription connection per client, shared with the
    /// locks' waiters), tries again, and parks until a release message (or,
    /// as a safety net, a second without one); each wake-up costs one round
    /// trip. Waiters of one client wake one per message, oldest first; a
    /// waiter that leaves permits over passes the wake-up on. Asking for more
    /// permits than the semaphore will ever have waits for ever (unless the
    /// client's [`wait_timeout`](crate::Settings::wait_timeout) is set, which
    /// bounds it): use [`acquire_many_within`](Semaphore::acquire_many_within)
    /// when unsure.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// use std::time::Duration;
    ///
    /// let pool = client.semaphore("upload-slots");
    /// pool.try_set_permits(4).await?;
    /// let three = pool.acquire_many(3).await?;     // all three, or none
    /// assert_eq!(three.permits(), 3);
    /// assert!(pool.try_acquire_many(2).await?.is_none()); // only one is left
    /// let waited = pool.acquire_many_within(2, Some(Duration::from_millis(50))).await;
    /// assert!(matches!(waited, Err(redlatch::Error::NoPermits { .. })));
    /// three.release().await?;
    /// assert!(pool.try_acquire_many(2).await?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidPermits`] for zero permits, [`Error::InvalidName`],
    /// [`Error::WrongValue`], connection errors (the permits may then have
    /// been taken and lost: see [`Semaphore`]).
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting and leaves nothing behind: an
    /// attempt in flight completes and, if it took permits, gives them back.
    pub fn acquire_many(
        &self,
        permits: u32,
    ) -> impl Future<Output = Result<SemaphorePermit>> + Send + '_ {
        self.acquire_many_within(permits, self.core.current_settings().wait_timeout)
    }

    /// One attempt: the guard if `permits` permits were free, else `None`
    /// (tokio's `Semaphore::try_acquire_many`). One round trip.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn try_acquire_many(&self, permits: u32) -> Result<Option<SemaphorePermit>> {
        self.acquire_waiting(permits, Wait::Once).await
    }

    /// Waits for `permits` permits as long as `wait` says: `None` for ever,
    /// `Some(wait)` at most `wait` (a zero one makes one attempt).
    ///
    /// Every call, retry and back-off fits in `wait` (one deadline for the
    /// call): a stalled, slow or unreachable server costs the wait, not a
    /// response timeout per attempt.
    ///
    /// # Errors
    /// [`Error::NoPermits`] when not enough were free for the whole wait;
    /// [`Error::ResponseTimeout`] naming the caller's wait
    /// ([`TimeLimit::Wait`](crate::TimeLimit::Wait)) when Redis had not
    /// answered when it ran out; else as [`Semaphore::acquire_many`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn acquire_many_within(
        &self,
        permits: u32,
        wait: Option<Duration>,
    ) -> Result<SemaphorePermit> {
        self.acquire_waiting(permits, Wait::within(wait))
            .await?
            .ok_or_else(|| self.no_permits(permits, wait.unwrap_or(Duration::MAX)))
    }

    /// Gives back `permits` permits without a guard (Redisson's `release(n)`),
    /// for permits taken elsewhere (a [`SemaphorePermit::forget`], another
    /// process). Returns the new count. It does not check that anyone took
    /// them: releasing more than were taken raises the count for good. One
    /// round trip; touches `PREFIX+NAME`, publishes on the channel.
    ///
    /// # Errors
    /// [`Error::InvalidPermits`] for zero, [`Error::InvalidName`],
    /// [`Error::WrongValue`], [`Error::OutcomeUnknown`] (sent, no reply: the
    /// permits may or may not be back; do not repeat blindly), connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have released the permits.
    pub async fn release(&self, permits: u32) -> Result<u64> {
        let keys = Arc::new(self.keys()?);
        self.check_permits(permits)?;
        release_permits(&self.core, &keys, permits)
            .await
            .map_err(|error| error.unknown_outcome("semaphore release"))
    }

    fn keys(&self) -> Result<SemaphoreKeys> {
        let settings = self.core.current_settings();
        SemaphoreKeys::new(&settings.key_prefix, &self.name)?.checked_for(&self.core.conn)
    }

    fn check_permits(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Err(Error::InvalidPermits {
                name: self.name.to_string(),
                permits: 0,
                reason: "at least one permit is needed",
            });
        }
        Ok(())
    }

    fn no_permits(&self, permits: u32, waited: Duration) -> Error {
        Error::NoPermits {
            name: self.name.to_string(),
            permits,
            waited,
        }
    }

    /// The acquire, driven by the wait loop.
    async fn acquire_waiting(&self, permits: u32, wait: Wait) -> Result<Option<SemaphorePermit>> {
        self.check_permits(permits)?;
        let keys = Arc::new(self.keys()?);
        let mut acquisition = SemaphoreAcquisition {
            semaphore: self,
            keys,
            permits,
        };
        wait_for(&mut acquisition, wait).await
    }

    /// One attempt, run to its end even if the caller goes away: `Some(left)` when taken. If the
    /// caller is gone when the reply comes, the permits are given back.
    async fn attempt(&self, keys: &Arc<SemaphoreKeys>, permits: u32) -> Result<Option<u64>> {
        let core = self.core.clone();
        let undo_core = self.core.clone();
        let task_keys = keys.clone();
        let undo_keys = keys.clone();
        let call_attempt = async move {
            let mut request = scripts::SEMAPHORE_ACQUIRE.call(&core.conn);
            request.key(&task_keys.key).arg(permits);
            let reply: Vec<i64> = send(&core, "semaphore acquire", request).await?;
            match reply.as_slice() {
                [1, left] => Ok(Some(*left as u64)),
                [0, _] => Ok(None),
                [-1, _] => Err(wrong_count(&task_keys)),
                other => Err(protocol("semaphore acquire", other)),
            }
        };
        let undo = move |taken: Result<Option<u64>>| async move {
            if matches!(taken, Ok(Some(_))) {
                let _ = release_permits(&undo_core, &undo_keys, permits).await;
            }
        };
        hand_over(&self.core.background, call_attempt, undo).await
    }
}

/// A semaphore's acquire, as the wait loop drives it.
struct SemaphoreAcquisition<'a> {
    semaphore: &'a Semaphore,
    keys: Arc<SemaphoreKeys>,
    permits: u32,
}

impl Acquisition for SemaphoreAcquisition<'_> {
    type Output = SemaphorePermit;

    async fn attempt(&mut self) -> Result<Step<SemaphorePermit>> {
        match self.semaphore.attempt(&self.keys, self.permits).await? {
            Some(left) => Ok(Step::Done {
                value: SemaphorePermit {
                    core: self.semaphore.core.clone(),
                    keys: self.keys.clone(),
                    permits: self.permits,
                    done: false,
                },
                more_left: left > 0,
            }),
            // Releases publish, but a holder that forgets its permits or a
            // count raised by hand does not: look again now and then.
            None => Ok(Step::Busy { retry_in: RECHECK }),
        }
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(vec![self.semaphore.core.wakeups.join(&self.keys.channel)])
    }

    fn wakes(&self) -> Wakes {
        // A waiter wanting more permits than a release freed passes the
        // wake-up on: the next waiter may want fewer.
        Wakes::One { pass_on_busy: true }
    }

    fn retry_after(&mut self, _error: &Error) -> Option<RetryPolicy> {
        // An attempt cut off may have taken permits: no blind retry.
        None
    }
}

/// Permits taken from a [`Semaphore`]; given back when released or dropped.
///
/// Dropping the guard releases the permits in the background; call
/// [`release`](SemaphorePermit::release) to learn whether it worked. Plain
/// permits never expire: nothing renews them and nothing can take them away.
#[must_use = "dropping a permit gives it back at once"]
#[derive(Debug)]
pub struct SemaphorePermit {
    core: Arc<Core>,
    keys: Arc<SemaphoreKeys>,
    permits: u32,
    done: bool,
}

impl SemaphorePermit {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The Redis key of the semaphore (prefix included).
    pub fn key(&self) -> &str {
        &self.keys.key
    }

    /// Gives the permits back now and returns the new available count. One
    /// round trip; publishes the count on the channel.
    ///
    /// # Errors
    /// [`Error::WrongValue`] (someone replaced the key).
    /// [`Error::OutcomeUnknown`] when the release was sent but no reply came
    /// back (on a Redis Cluster, not even to sending it again): the permits
    /// may or may not be back; do not release them again blindly, read
    /// [`Semaphore::available_permits`] once Redis is back. Other connection
    /// errors: the permits were not given back, and may be lost for good
    /// (see [`Semaphore`]).
    ///
    /// # Cancel safety
    /// The release runs in a task of its own: dropping the future does not stop it.
    pub async fn release(mut self) -> Result<u64> {
        self.done = true;
        let core = self.core.clone();
        let keys = self.keys.clone();
        let permits = self.permits;
        run_to_end(&self.core.background, async move {
            release_permits(&core, &keys, permits).await
        })
        .await
        .map_err(|error| error.unknown_outcome("semaphore release"))
    }

    /// Keeps the permits taken for good: nothing gives them back (tokio's
    /// `SemaphorePermit::forget`). Another call to [`Semaphore::release`] can.
    pub fn forget(mut self) {
        self.done = true;
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            let core = self.core.clone();
            let keys = self.keys.clone();
            let permits = self.permits;
            spawn_undo(&self.core.background, async move {
                if let Err(error) = release_permits(&core, &keys, permits).await {
                    tracing::warn!(semaphore = %keys.key, %error, "redlatch: releasing dropped permits failed; they are lost");
                }
            });
        }
    }
}

/// Gives `permits` back; returns the new count. One round trip.
pub(crate) async fn release_permits(
    core: &Arc<Core>,
    keys: &SemaphoreKeys,
    permits: u32,
) -> Result<u64> {
    let mut request = scripts::SEMAPHORE_RELEASE.call(&core.conn);
    request
        .key(&keys.key)
        .arg(&keys.channel)
        .arg(permits)
        .arg(core.conn.publish_command());
    let reply: i64 = send(core, "semaphore release", request).await?;
    u64::try_from(reply).map_err(|_| wrong_count(keys))
}

fn wrong_count(keys: &SemaphoreKeys) -> Error {
    Error::WrongValue {
        key: keys.key.clone(),
        expected: COUNT,
    }
}

pub(crate) fn protocol(op: &'static str, reply: &[i64]) -> Error {
    Error::Protocol {
        op,
        detail: format!("{reply:?}"),
    }
}

//! The permit-expirable semaphore: Redisson's `RPermitExpirableSemaphore`,
//! with permits kept alive by their holder and reclaimed when it dies.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::base::handle_options::{lease_option, waiting_methods};
use crate::base::hold_accessors::hold_accessors;
use crate::engine::acquire::lease_choice;
use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::cancel::{hand_over, run_to_end, spawn_undo};
use crate::engine::context::Core;
use crate::engine::hold::{Hold, LostReason, NewHold};
use crate::engine::hold_kind::{BatchRenewal, HoldKind};
use crate::engine::script_call::{call, send};
use crate::engine::wait::{Acquisition, Step, Wait, Wakes, wait_for};
use crate::engine::wakeup::Ticket;
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::semaphore::keys::{SemaphoreKeys, permit_member};
use crate::semaphore::scripts;
use crate::semaphore::{RECHECK, Semaphore, protocol};
use crate::settings::RetryPolicy;

/// What the two keys of an expirable semaphore should hold (for [`Error::WrongValue`]).
const LAYOUT: &str = "a permit count (string) and permit expiries (sorted set)";

/// Renews expirable permits (`permit_renew.lua`): the semaphore's expiries
/// key, the permit's member, the lease, per permit.
pub(crate) static PERMIT_RENEWAL: BatchRenewal = BatchRenewal {
    name: "permit",
    script: &scripts::PERMIT_RENEW,
    add_hold: |invocation, key, id, lease_ms| {
        invocation.key(key).arg(permit_member(id)).arg(lease_ms);
    },
    is_lock: false,
    native: None,
    string_value: false,
    keeps_lease: false,
};

/// A handle to one named semaphore whose permits expire unless their holder
/// keeps them: Redisson's `RPermitExpirableSemaphore`, in Rust.
///
/// Each acquire takes one permit, with an id and a lease. While the
/// [`ExpirablePermit`] guard lives, its client renews the lease (one task per
/// client renews every permit it holds, up to [`RENEW_BATCH`](crate::Client::RENEW_BATCH) per round trip,
/// at a third of the lease), so a permit comes back only when it is released,
/// dropped, or its holder dies: a crashed or partitioned holder stops
/// renewing, its lease runs out, and the next acquire (or
/// [`available_permits`](PermitSemaphore::available_permits)) by anyone
/// reclaims it. The lease is the client's
/// [`default_lease`](crate::Settings::default_lease), like a lock's.
///
/// Expiries are written with the Redis server's clock, so clients' clocks do
/// not matter; the guard judges its own validity on the lease clock from
/// when the request was sent, with the locks' drift margin.
///
/// # Keys
///
/// `PREFIX+NAME` (string: available permits), `{PREFIX+NAME}:timeout`
/// (sorted set: permit id → expiry in ms since the epoch) and the channel
/// `redisson_sc:{PREFIX+NAME}` (the new count is published when permits come
/// back): the layout of Redisson's `RPermitExpirableSemaphore`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let slots = client.permit_semaphore("render-slots");
/// slots.try_set_permits(2).await?;
///
/// let permit = slots.acquire().await?;      // renewed while `permit` lives
/// println!("holding permit {}", permit.id());
/// assert_eq!(slots.available_permits().await?, 1);
/// tokio::select! {
///     _ = async { /* render */ } => permit.release().await?,
///     _ = permit.lost() => eprintln!("permit lost: stop rendering"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PermitSemaphore {
    core: Arc<Core>,
    name: Arc<str>,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
}

impl Primitive for PermitSemaphore {
    fn from_client(state: ClientState, name: String) -> PermitSemaphore {
        PermitSemaphore::new(state.core, name)
    }
}

impl PermitSemaphore {
    pub(crate) fn new(core: Arc<Core>, name: String) -> PermitSemaphore {
        PermitSemaphore {
            core,
            name: Arc::from(name),
            lease: None,
        }
    }
}

lease_option!(
    PermitSemaphore,
    "# let server = testkit::RedisServer::start().unwrap();\n# let client = redlatch::Client::connect(&server.url()).await?;\n# client.permit_semaphore(\"report\").try_set_permits(1).await?;",
    "client.permit_semaphore(\"report\")",
    "acquire"
);
waiting_methods!(
    PermitSemaphore => ExpirablePermit,
    "[`Error::NoPermits`]",
    "One attempt: a permit if one was free, else `None`. One round trip.",
    "Waits for a free permit as long as `wait` says."
);

/// What one acquire attempt found.
enum PermitReply {
    /// Taken, with `left` permits still free; the request was sent at `sent_at`.
    Taken { sent_at: LeaseInstant, left: i64 },
    /// None free; the earliest held permit expires in `wait_ms` (-1: none held).
    Busy { wait_ms: i64 },
}

impl PermitSemaphore {
    /// The semaphore's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the number of permits if none is set yet; returns whether it did.
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits)
    /// (the same key).
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have set the count.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.plain().try_set_permits(permits).await
    }

    /// Adds `delta` permits (takes them away when negative); returns the new
    /// count. As [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    ///
    /// # Errors
    /// As [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have changed the count.
    pub async fn add_permits(&self, delta: i64) -> Result<i64> {
        self.plain().add_permits(delta).await
    }

    /// Reclaims permits whose lease ran out, then returns how many are free.
    /// One round trip; touches both keys, publishes when it reclaimed any.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongValue`], connection errors.
    ///
    /// # Cancel safety
    /// Safe: a reclaim is never wrong, whoever does it.
    pub async fn available_permits(&self) -> Result<i64> {
        let keys = self.keys()?;
        let mut invocation = scripts::PERMIT_AVAILABLE.prepare_invoke();
        invocation
            .key(&keys.key)
            .key(&keys.timeouts)
            .arg(&keys.channel)
            .arg(self.core.conn.publish_command());
        let reply: Vec<i64> = call(&self.core, "permit available", &invocation).await?;
        match reply.as_slice() {
            [1, count, _] => Ok(*count),
            [-1, _, _] => Err(wrong_layout(&keys)),
            other => Err(protocol("permit available", other)),
        }
    }

    /// Waits for a free permit and takes it, renewed while the guard lives
    /// (unless the handle has a fixed lease: [`PermitSemaphore::with_lease`],
    /// Redisson's `acquire(leaseTime)`), or for at most the client's
    /// [`wait_timeout`](crate::Settings::wait_timeout) when it is set.
    ///
    /// One round trip when a permit is free (expired ones are reclaimed in
    /// the same call). Otherwise the call subscribes to the channel, tries
    /// again, and parks until a release message, the moment the earliest
    /// held permit would expire, or (a safety net) a second; each wake-up
    /// costs one round trip.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidDuration`] (the client's
    /// default lease is below [`MIN_WATCHDOG_LEASE`](crate::Settings::MIN_WATCHDOG_LEASE)),
    /// [`Error::WrongValue`], connection errors (a permit taken by a call cut
    /// off this way expires after one lease); [`Error::NoPermits`] when the
    /// client's wait timeout ran out.
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting and leaves nothing behind: an
    /// attempt in flight completes and, if it took a permit, gives it back.
    pub fn acquire(&self) -> impl Future<Output = Result<ExpirablePermit>> + Send + '_ {
        self.acquire_within(self.core.current_settings().wait_timeout)
    }

    fn plain(&self) -> crate::semaphore::Semaphore {
        Semaphore::new(self.core.clone(), self.name.to_string())
    }

    fn keys(&self) -> Result<SemaphoreKeys> {
        let settings = self.core.current_settings();
        SemaphoreKeys::new(&settings.key_prefix, &self.name)?.checked_for(&self.core.conn)
    }

    /// The error of a wait for a permit that ran out after `waited`.
    fn timeout(&self, waited: Duration) -> Error {
        Error::NoPermits {
            name: self.name.to_string(),
            permits: 1,
            waited,
        }
    }

    /// The acquire, driven by the wait loop, on the handle's lease.
    async fn acquire_waiting(&self, wait: Wait) -> Result<Option<ExpirablePermit>> {
        let keys = Arc::new(self.keys()?);
        let core = &self.core;
        let (lease_ms, renewed) = lease_choice(core, self.lease)?;
        let mut acquisition = PermitAcquisition {
            semaphore: self,
            keys,
            lease_ms,
            renewed,
        };
        wait_for(&mut acquisition, wait).await
    }

    /// The guard of a permit just taken. The client's watchdog renews
    /// permits as it renews locks.
    fn permit(
        &self,
        keys: Arc<SemaphoreKeys>,
        id: Arc<str>,
        renewed: bool,
        lease_ms: u64,
        sent_at: LeaseInstant,
    ) -> ExpirablePermit {
        let hold = self.core.watchdog.register(NewHold {
            key: Arc::from(keys.timeouts.as_str()),
            owner: id,
            kind: HoldKind::Batched(&PERMIT_RENEWAL),
            lease_ms,
            renewed,
            token: 0,
            named_owner: false,
            sent_at,
        });
        ExpirablePermit {
            core: self.core.clone(),
            name: self.name.clone(),
            keys,
            hold,
            done: false,
        }
    }

    /// One attempt, run to its end even if the caller goes away; an abandoned permit is given back.
    async fn attempt(
        &self,
        keys: &Arc<SemaphoreKeys>,
        id: &Arc<str>,
        lease_ms: u64,
    ) -> Result<PermitReply> {
        let core = self.core.clone();
        let undo_core = self.core.clone();
        let task_keys = keys.clone();
        let undo_keys = keys.clone();
        let task_id = id.clone();
        let undo_id = id.clone();
        let call_attempt = async move {
            let sent_at = LeaseInstant::now();
            let mut request = scripts::PERMIT_ACQUIRE.call(&core.conn);
            request
                .key(&task_keys.key)
                .key(&task_keys.timeouts)
                .arg(&task_keys.channel)
                .arg(permit_member(&task_id))
                .arg(lease_ms)
                .arg(core.conn.publish_command());
            let reply: Vec<i64> = send(&core, "permit acquire", request).await?;
            match reply.as_slice() {
                [1, left] => Ok(PermitReply::Taken {
                    sent_at,
                    left: *left,
                }),
                [0, wait_ms] => Ok(PermitReply::Busy { wait_ms: *wait_ms }),
                [-1, _] => Err(wrong_layout(&task_keys)),
                other => Err(protocol("permit acquire", other)),
            }
        };
        let undo = move |attempt: Result<PermitReply>| async move {
            if matches!(attempt, Ok(PermitReply::Taken { .. })) {
                let _ = release_permit(&undo_core, &undo_keys, &undo_id).await;
            }
        };
        hand_over(&self.core.background, call_attempt, undo).await
    }
}

/// A permit semaphore's acquire, as the wait loop drives it.
struct PermitAcquisition<'a> {
    semaphore: &'a PermitSemaphore,
    keys: Arc<SemaphoreKeys>,
    lease_ms: u64,
    renewed: bool,
}

impl Acquisition for PermitAcquisition<'_> {
    type Output = ExpirablePermit;

    async fn attempt(&mut self) -> Result<Step<ExpirablePermit>> {
        // A fresh id per attempt: an abandoned attempt's undo releases its own.
        let id: Arc<str> = Arc::from(Uuid::new_v4().simple().to_string());
        match self
            .semaphore
            .attempt(&self.keys, &id, self.lease_ms)
            .await?
        {
            PermitReply::Taken { sent_at, left } => Ok(Step::Done {
                value: self.semaphore.permit(
                    self.keys.clone(),
                    id,
                    self.renewed,
                    self.lease_ms,
                    sent_at,
                ),
                more_left: left > 0,
            }),
            PermitReply::Busy { wait_ms } => {
                let expiry = u64::try_from(wait_ms).map_or(RECHECK, |ms| {
                    // A hair past the expiry, so the reclaim finds it due.
                    Duration::from_millis(ms.saturating_add(1))
                });
                Ok(Step::Busy {
                    retry_in: expiry.min(RECHECK),
                })
            }
        }
    }

    fn join(&mut self) -> Result<Vec<Ticket>> {
        Ok(vec![self.semaphore.core.wakeups.join(&self.keys.channel)])
    }

    fn wakes(&self) -> Wakes {
        Wakes::One {
            pass_on_busy: false,
        }
    }

    fn retry_after(&mut self, _error: &Error) -> Option<RetryPolicy> {
        // An attempt cut off may have taken a permit: no blind retry.
        None
    }
}

/// One permit of a [`PermitSemaphore`]: its id and lease. The client renews
/// it while the guard lives (unless it has a fixed lease); releasing or
/// dropping the guard gives it back.
///
/// Like a lock's [`Guard`](crate::Guard), a permit can be lost while its guard
/// lives, if renewals cannot get through before the lease runs out (Redis
/// unreachable, the process paused): [`lost`](ExpirablePermit::lost) and
/// [`is_held`](ExpirablePermit::is_held) say so.
#[must_use = "dropping a permit gives it back at once"]
pub struct ExpirablePermit {
    core: Arc<Core>,
    name: Arc<str>,
    keys: Arc<SemaphoreKeys>,
    /// Shared with the watchdog: its `owner` is the permit id.
    hold: Arc<Hold>,
    done: bool,
}

impl std::fmt::Debug for ExpirablePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirablePermit")
            .field("name", &self.name)
            .field("id", &self.hold.owner)
            .field("held", &self.is_held())
            .finish()
    }
}

hold_accessors!(ExpirablePermit, "permit");

impl ExpirablePermit {
    /// The permit id, 32 hex digits, as Redisson shows its permit ids; the
    /// expiries sorted set holds its 16 bytes, raw, as Redisson stores them.
    pub fn id(&self) -> &str {
        self.hold.owner.as_str(self.core.owner_prefix())
    }

    /// The semaphore's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease: the client's default lease when renewed, else the fixed one.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.hold.lease_ms())
    }

    /// Gives the permit back now. One round trip; touches both keys and
    /// publishes the new count.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the permit had expired (it is back in the pool
    /// either way, but work done under it may have overlapped with another
    /// holder), [`Error::WrongValue`]. [`Error::OutcomeUnknown`] when the
    /// release was sent but no reply came back (on a Redis Cluster, not even
    /// to sending it again): it may or may not be back yet. Other connection
    /// errors: it was not released. Either way the permit comes back when its
    /// lease runs out at the latest.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: it runs to its end in the background.
    pub async fn release(mut self) -> Result<()> {
        let release = self.stop_and_release();
        let released = run_to_end(&self.core.background, release)
            .await
            .map_err(|error| error.unknown_outcome("permit release"))?;
        if released {
            Ok(())
        } else {
            self.hold.mark_lost(LostReason::Gone);
            Err(Error::NotHeld {
                name: self.name.to_string(),
            })
        }
    }

    /// Stops renewing the permit; returns its release, to run to its end.
    fn stop_and_release(&mut self) -> impl Future<Output = Result<bool>> + Send + 'static {
        self.done = true;
        self.core
            .watchdog
            .remove_guard(&self.hold, self.hold.renewed());
        let (core, keys, id) = (
            self.core.clone(),
            self.keys.clone(),
            self.hold.owner.text(self.core.owner_prefix()),
        );
        async move { release_permit(&core, &keys, &id).await }
    }
}

impl Drop for ExpirablePermit {
    fn drop(&mut self) {
        if !self.done {
            let release = self.stop_and_release();
            spawn_undo(&self.core.background, async move {
                let _ = release.await;
            });
        }
    }
}

/// Gives one permit back by id. `Ok(true)`: released while its lease ran;
/// `Ok(false)`: it had expired (released or reclaimed). One round trip.
async fn release_permit(core: &Arc<Core>, keys: &SemaphoreKeys, id: &str) -> Result<bool> {
    let mut request = scripts::PERMIT_RELEASE.call(&core.conn);
    request
        .key(&keys.key)
        .key(&keys.timeouts)
        .arg(&keys.channel)
        .arg(permit_member(id))
        .arg(core.conn.publish_command());
    let reply: i64 = send(core, "permit release", request).await?;
    match reply {
        1 => Ok(true),
        0 | 2 => Ok(false),
        -1 => Err(wrong_layout(keys)),
        other => Err(protocol("permit release", &[other])),
    }
}

fn wrong_layout(keys: &SemaphoreKeys) -> Error {
    Error::WrongValue {
        key: keys.key.clone(),
        expected: LAYOUT,
    }
}

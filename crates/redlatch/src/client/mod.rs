//! The client: connections, settings, and the background tasks locks share.

pub(crate) mod builder;
mod deployment;
pub(crate) mod listing;
mod scan;
mod waits;

use std::sync::Arc;

use uuid::Uuid;

use crate::count_down_latch::CountDownLatch;
use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::context::Core;
use crate::error::Result;
use crate::fair_lock::FairLock;
use crate::lock::Lock;
use crate::lock::plain_family::PlainFamily;
use crate::rw_lock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::semaphore::permit::PermitSemaphore;
#[cfg(feature = "watch")]
use crate::settings::watch::SettingsWatcher;
use crate::settings::{ApplySettings, Settings};
use crate::spin_lock::SpinLock;
use crate::token_lock::TokenLock;
use crate::transport::capabilities::Capabilities;
use crate::transport::shared::RedisConnection;

/// A connection to Redis (one server, a cluster, or a Sentinel-monitored
/// master), shared by every lock made from it.
///
/// Cheap to clone (an `Arc`): clones share one multiplexed command
/// connection (reconnected by itself), one subscription connection for every
/// waiter, one loss-watch connection (none with
/// [`ClientBuilder::lean`](crate::ClientBuilder::lean)), and one watchdog
/// task that renews every held lock. Create one per process and pass clones
/// around.
///
/// Every client has a random [`id`](Client::id) (a UUID v4). Lock owners are
/// `<id>:<owner>`, so owners are unique across processes.
///
/// ```no_run
/// # async fn demo() -> redlatch::Result<()> {
/// let client = redlatch::Client::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("report:daily").acquire().await?;
/// // ... only one process in the fleet runs this at a time ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) core: Arc<Core>,
    /// The reentrant lock's state on this client (its coalesced calls and
    /// hand-off courtesy), shared by its locks, spin locks and guards.
    pub(crate) plain: Arc<PlainFamily>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.core.id)
            .field("settings", &*self.core.settings.read())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Most holds renewed by one script call.
    pub const RENEW_BATCH: usize = crate::engine::watchdog::RENEW_BATCH;

    /// A handle to the lock `name` (no round trip; the name is checked when
    /// the lock is used). See [`Lock`].
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.core.clone(), self.plain.clone(), name.into())
    }

    /// A handle to the fair lock `name` (no round trip; the name is checked
    /// when the lock is used). See [`FairLock`].
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        self.handle(name)
    }

    /// A handle to the spin lock `name`: a [`Lock`] whose waiters poll
    /// rather than subscribe (no round trip here). See [`SpinLock`].
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        SpinLock::new(self.core.clone(), self.plain.clone(), name.into())
    }

    /// A handle to the token lock `name`: a non-reentrant lock whose key is
    /// a string holding its holder's token, released and renewed without a
    /// script where the server allows (no round trip here). See [`TokenLock`].
    pub fn token_lock(&self, name: impl Into<String>) -> TokenLock {
        self.handle(name)
    }

    /// A handle to the read-write lock `name` (no round trip; the name is
    /// checked when the lock is used). See [`ReadWriteLock`].
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        self.handle(name)
    }

    /// A handle to the counting semaphore `name` (no round trip; the name is
    /// checked when the semaphore is used). See [`Semaphore`].
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        self.handle(name)
    }

    /// A handle to the permit-expirable semaphore `name` (no round trip; the
    /// name is checked when it is used). See [`PermitSemaphore`].
    pub fn permit_semaphore(&self, name: impl Into<String>) -> PermitSemaphore {
        self.handle(name)
    }

    /// A handle to the count-down latch `name` (no round trip; the name is
    /// checked when the latch is used): `handle::<CountDownLatch>(name)`.
    /// See [`CountDownLatch`].
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        self.handle(name)
    }

    /// A handle to the primitive `P` named `name` (no round trip; the name
    /// is checked when the handle is used): any [`Primitive`], including
    /// those without a method of their own name here.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// use redlatch::{CountDownLatch, Semaphore};
    ///
    /// let done = client.handle::<CountDownLatch>("jobs-done");
    /// let slots = client.handle::<Semaphore>("upload-slots");
    /// assert!(slots.try_set_permits(2).await?);
    /// assert_eq!(done.count().await?, 0); // never set: open
    /// # Ok(())
    /// # }
    /// ```
    pub fn handle<P: Primitive>(&self, name: impl Into<String>) -> P {
        P::from_client(
            ClientState {
                core: self.core.clone(),
            },
            name.into(),
        )
    }

    /// The client's command connection, for the application's own commands
    /// on the same deployment (see [`RedisConnection`]).
    pub fn redis_connection(&self) -> RedisConnection {
        RedisConnection::new(self.core.conn.clone(), self.core.settings.clone())
    }

    /// What the server offered when this client connected: its version,
    /// and for each feature redlatch can use whether it is available, absent
    /// or refused to this client (the fallback used then is named on each
    /// field of [`Capabilities`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let url = server.url();
    /// let client = redlatch::Client::connect(&url).await?;
    /// println!("{}", client.capabilities().summary());
    /// // e.g. "redis 7.0.15: functions available, WAITAOF absent, NO-EVICT available"
    /// # assert!(client.capabilities().server.is_some());
    /// # Ok(()) }
    /// ```
    pub fn capabilities(&self) -> &Capabilities {
        &self.core.capabilities
    }

    /// This client's id, the first half of every owner it writes.
    pub fn id(&self) -> Uuid {
        self.core.id
    }

    /// The settings in force now.
    pub fn settings(&self) -> Settings {
        (**self.core.settings.read()).clone()
    }

    /// Replaces the settings of this client and its clones, at run time.
    ///
    /// Each field says when a change takes effect (see [`Settings`]): most at
    /// the next call; a new default lease also at the next renewal of every
    /// renewed lock, which this brings forward. The URL is fixed for the life
    /// of a client.
    ///
    /// # Errors
    /// [`Error::InvalidDuration`](crate::Error::InvalidDuration) or [`Error::InvalidConfig`](crate::Error::InvalidConfig): the old settings stay.
    pub fn update_settings(&self, settings: Settings) -> Result<()> {
        self.core.apply_settings(settings)
    }

    /// Keeps this client's settings in step with a TOML file (see
    /// [`Settings::load`]) while the returned watcher lives.
    ///
    /// The file is read now; afterwards each change is applied after a short
    /// debounce (250 ms). A file that cannot be read or parsed is reported
    /// (a `tracing` warning, and [`SettingsWatcher::last_error`]) and the
    /// settings in force stay.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) or [`Error::InvalidDuration`](crate::Error::InvalidDuration) when the file is
    /// bad now, or cannot be watched.
    #[cfg(feature = "watch")]
    #[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
    pub fn watch_settings(&self, path: impl AsRef<std::path::Path>) -> Result<SettingsWatcher> {
        SettingsWatcher::start(
            self.core.clone(),
            path.as_ref(),
            std::sync::Arc::new(|_: &mut Settings| {}),
        )
    }

    /// As [`Client::watch_settings`], with `adjust` applied to the settings
    /// read from the file before they take effect: for values that must win
    /// over the file, such as command-line flags.
    ///
    /// ```no_run
    /// # fn demo(client: redlatch::Client) -> redlatch::Result<()> {
    /// let lease = std::time::Duration::from_secs(5); // from --lease
    /// let _watcher = client.watch_settings_with("redlatch.toml", move |settings| {
    ///     settings.default_lease = lease;
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::watch_settings`].
    #[cfg(feature = "watch")]
    #[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
    pub fn watch_settings_with(
        &self,
        path: impl AsRef<std::path::Path>,
        adjust: impl Fn(&mut Settings) + Send + Sync + 'static,
    ) -> Result<SettingsWatcher> {
        SettingsWatcher::start(
            self.core.clone(),
            path.as_ref(),
            std::sync::Arc::new(adjust),
        )
    }

    /// Number of locks this client holds now (one per owner and lock,
    /// re-entries included once).
    pub fn held_locks(&self) -> usize {
        self.core.watchdog.held_count()
    }

    /// Clean-ups of this client still running in the background: calls
    /// whose callers dropped their futures (they run to their end, and
    /// whatever they took is given back), and the releases of dropped
    /// guards. Zero once every call this client started has ended: a
    /// process that exits right after dropping guards or cancelling
    /// acquires can wait for it, or leave what they hold to expire with its
    /// lease.
    ///
    /// ```no_run
    /// # async fn example(client: redlatch::Client) {
    /// let lock = client.lock("report");
    /// let guard = lock.acquire().await.unwrap();
    /// drop(guard); // releases in the background
    /// while client.background_tasks() > 0 {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    /// }
    /// # }
    /// ```
    pub fn background_tasks(&self) -> usize {
        self.core.background.running()
    }

    /// Renewal script calls the watchdog has made since the client started,
    /// for locks and expirable permits alike. With many held this grows by
    /// about one per [`RENEW_BATCH`](crate::Client::RENEW_BATCH) holds of one kind
    /// per renewal period.
    pub fn renewal_round_trips(&self) -> u64 {
        self.core.watchdog.renewal_round_trips()
    }
}

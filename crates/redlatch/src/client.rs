//! The client: connections, settings, and the background tasks locks share.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use redis::IntoConnectionInfo;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::{ClientBuilder, ConnectionSettings, LockSettings};
use crate::courtesy::Courtesy;
use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::wakeup::{Timeouts, Wakeups};
use crate::watchdog::Watchdog;

/// A connection to one Redis server, shared by every lock made from it.
///
/// Cheap to clone (an `Arc`): clones share one multiplexed command
/// connection (reconnected by itself), one subscription connection for every
/// waiter, and one watchdog task that renews every held lock. Create one per
/// process and pass clones around.
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
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) id: Uuid,
    pub(crate) conn: ConnectionManager,
    pub(crate) settings: RwLock<Arc<LockSettings>>,
    pub(crate) wakeups: Wakeups,
    pub(crate) watchdog: Watchdog,
    pub(crate) courtesy: Courtesy,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Source of anonymous owner names: one fresh owner per acquisition.
    owner_seq: AtomicU64,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("settings", &*self.inner.settings.read())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects with default settings (30 s lease, 10 s connect timeout, 3 s
    /// response timeout, 3 reconnection attempts, no key prefix).
    ///
    /// # Errors
    /// As [`ClientBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Client> {
        Client::builder(url).connect().await
    }

    /// Starts a [`ClientBuilder`] for `url`.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    pub(crate) async fn open(
        connection: ConnectionSettings,
        locks: LockSettings,
    ) -> Result<Client> {
        let info = connection
            .url
            .as_str()
            .into_connection_info()
            .map_err(|error| Error::InvalidConfig(format!("redis URL: {error}")))?
            // Lock traffic is many tiny requests: never let Nagle hold them back.
            .set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let redis_client = redis::Client::open(info)
            .map_err(|error| Error::InvalidConfig(format!("redis URL: {error}")))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connection.connect_timeout))
            .set_response_timeout(Some(connection.response_timeout))
            .set_number_of_retries(connection.retries)
            .set_min_delay(connection.retry_delay)
            .set_max_delay(std::time::Duration::from_secs(2));
        let conn = ConnectionManager::new_with_config(redis_client.clone(), manager_config)
            .await
            .map_err(|error| Error::from_redis("connect", error))?;
        let runtime = tokio::runtime::Handle::current();
        let shutdown = CancellationToken::new();
        let wakeups = Wakeups::start(
            redis_client,
            Timeouts {
                connect: connection.connect_timeout,
                response: connection.response_timeout,
            },
            &runtime,
            shutdown.clone(),
        );
        let watchdog = Watchdog::start(conn.clone(), &runtime, shutdown.clone());
        Ok(Client {
            inner: Arc::new(ClientInner {
                id: Uuid::new_v4(),
                conn,
                settings: RwLock::new(Arc::new(locks)),
                wakeups,
                watchdog,
                courtesy: Courtesy::default(),
                runtime,
                owner_seq: AtomicU64::new(0),
                shutdown,
            }),
        })
    }

    /// A handle to the lock `name` (no round trip; the name is checked when
    /// the lock is used). See [`Lock`].
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// This client's id, the first half of every owner it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The lock settings in force now.
    pub fn settings(&self) -> LockSettings {
        (**self.inner.settings.read()).clone()
    }

    /// Replaces the lock settings of this client and its clones, at run time.
    ///
    /// Applies to acquisitions that start afterwards. Locks already held keep
    /// their lease and key. Connection settings (URL, timeouts, retries) are
    /// fixed for the life of a client.
    ///
    /// # Errors
    /// [`Error::InvalidDuration`] or [`Error::InvalidConfig`]: the old settings stay.
    pub fn update_settings(&self, settings: LockSettings) -> Result<()> {
        settings.validate()?;
        *self.inner.settings.write() = Arc::new(settings);
        Ok(())
    }

    /// Number of locks this client holds now (one per owner and lock,
    /// re-entries included once).
    pub fn held_locks(&self) -> usize {
        self.inner.watchdog.held_count()
    }

    /// Renewal script calls the watchdog has made since the client started.
    /// With many locks held this grows by about one per
    /// [`RENEW_BATCH`](crate::RENEW_BATCH) locks per renewal period.
    pub fn renewal_round_trips(&self) -> u64 {
        self.inner.watchdog.renewal_round_trips()
    }
}

impl ClientInner {
    pub(crate) fn lock_settings(&self) -> Arc<LockSettings> {
        self.settings.read().clone()
    }

    /// A fresh owner name, unique within this client.
    pub(crate) fn anonymous_owner(&self) -> Arc<str> {
        let seq = self.owner_seq.fetch_add(1, Ordering::Relaxed);
        Arc::from(format!("{}:#{seq}", self.id))
    }

    /// The owner field for a caller-named owner.
    pub(crate) fn named_owner(&self, owner: &str) -> Arc<str> {
        Arc::from(format!("{}:{owner}", self.id))
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // The last handle is gone (guards hold one too): stop the background tasks.
        self.shutdown.cancel();
    }
}

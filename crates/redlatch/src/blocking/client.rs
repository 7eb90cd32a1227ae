//! The blocking client.

use std::sync::Arc;

use super::CountDownLatch;
use super::fair_lock::FairLock;
use super::lock::{Lock, SpinLock};
use super::permit_semaphore::PermitSemaphore;
use super::rw_lock::ReadWriteLock;
use super::semaphore::Semaphore;
use super::token_lock::TokenLock;
use crate::client::builder::Builder;
use crate::engine::blocking_handle::Handle;
use crate::engine::bridge::Bridge;
use crate::engine::by_name::Primitive;
use crate::error::Result;
use crate::settings::Settings;

/// Builds a blocking [`Client`]: the async [`crate::ClientBuilder`]'s
/// methods, the same settings and defaults, and a `connect` that blocks.
///
/// ```
/// # let server = testkit::RedisServer::start().unwrap();
/// # let url = server.url();
/// use std::time::Duration;
///
/// let client = redlatch::blocking::Client::builder(&url) // "redis://127.0.0.1:6379"
///     .key_prefix("shop:")
///     .default_lease(Duration::from_secs(10))
///     .connect()?;
/// assert_eq!(client.settings().default_lease, Duration::from_secs(10));
/// # Ok::<(), redlatch::Error>(())
/// ```
///
/// A cluster or a Sentinel group as for the async client:
/// `blocking::ClientBuilder::cluster(nodes)`,
/// `blocking::ClientBuilder::sentinel(sentinels, master)`.
pub type ClientBuilder = Builder<Client>;

impl Builder<Client> {
    /// Checks the settings and connects, on a runtime of the client's own
    /// (see [`crate::ClientBuilder::connect`]).
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::connect`], and
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) if the runtime
    /// cannot start.
    pub fn connect(self) -> Result<Client> {
        Client::connect_with(self.making())
    }
}

/// A blocking [`crate::Client`]: the same connection and background tasks,
/// run by a runtime of its own (one worker thread), with methods that block.
///
/// Cheap to clone; clones share the connection and the runtime, which stops
/// when the last clone, handle and guard are gone.
#[derive(Clone)]
pub struct Client {
    inner: crate::Client,
    bridge: Arc<Bridge>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Client")
            .field("client", &self.inner)
            .finish()
    }
}

impl Client {
    /// Connects with default settings, as [`crate::Client::connect`].
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::connect`], and [`Error::InvalidConfig`](crate::Error::InvalidConfig)
    /// if the runtime cannot start.
    pub fn connect(url: &str) -> Result<Client> {
        Client::builder(url).connect()
    }

    /// Starts a [`ClientBuilder`] for `url`, as [`crate::Client::builder`].
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// Connects with the settings of an async `builder`, for one made
    /// elsewhere (such as [`Deployment::builder`](crate::Deployment::builder)).
    ///
    /// ```
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let url = server.url();
    /// let builder = redlatch::Client::builder(&url)
    ///     .default_lease(std::time::Duration::from_secs(10));
    /// let client = redlatch::blocking::Client::connect_with(builder)?;
    /// assert_eq!(client.settings().default_lease.as_secs(), 10);
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_with(builder: crate::ClientBuilder) -> Result<Client> {
        let bridge = Bridge::start()?;
        let inner = bridge.run("connect", builder.connect())?;
        Ok(Client { inner, bridge })
    }

    /// A handle to the lock `name` (see [`crate::Lock`]).
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.inner.lock(name), self.bridge.clone())
    }

    /// A handle to the fair lock `name` (see [`crate::FairLock`]).
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        self.handle(name)
    }

    /// A handle to the token lock `name` (see [`crate::TokenLock`]).
    pub fn token_lock(&self, name: impl Into<String>) -> TokenLock {
        self.handle(name)
    }

    /// A handle to the spin lock `name` (see [`crate::SpinLock`]).
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        SpinLock::new(self.inner.spin_lock(name), self.bridge.clone())
    }

    /// A handle to the read-write lock `name` (see [`crate::ReadWriteLock`]).
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        self.handle(name)
    }

    /// A handle to the counting semaphore `name` (see [`crate::Semaphore`]).
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        self.handle(name)
    }

    /// A handle to the count-down latch `name` (see [`crate::CountDownLatch`]):
    /// `handle::<redlatch::CountDownLatch>(name)`.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        self.handle(name)
    }

    /// A blocking handle to the primitive `P` named `name` (see
    /// [`crate::Client::handle`]): any [`Primitive`], with the blocking
    /// calls its own folder writes.
    ///
    /// ```
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let url = server.url();
    /// let client = redlatch::blocking::Client::connect(&url)?;
    /// let done = client.handle::<redlatch::CountDownLatch>("jobs-done");
    /// assert!(done.await_within(Some(std::time::Duration::ZERO))?); // never set: open
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn handle<P: Primitive>(&self, name: impl Into<String>) -> Handle<P> {
        Handle::new(self.inner.handle(name), self.bridge.clone())
    }

    /// A handle to the permit-expirable semaphore `name` (see [`crate::PermitSemaphore`]).
    pub fn permit_semaphore(&self, name: impl Into<String>) -> PermitSemaphore {
        self.handle(name)
    }

    /// This client's id (see [`crate::Client::id`]).
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id()
    }

    /// The settings in force now.
    pub fn settings(&self) -> Settings {
        self.inner.settings()
    }

    /// Replaces the settings at run time (see [`crate::Client::update_settings`]).
    ///
    /// # Errors
    /// As [`crate::Client::update_settings`].
    pub fn update_settings(&self, settings: Settings) -> Result<()> {
        self.inner.update_settings(settings)
    }

    /// Number of locks this client holds now.
    pub fn held_locks(&self) -> usize {
        self.inner.held_locks()
    }

    /// What the server offered at connect (see [`crate::Client::capabilities`]).
    pub fn capabilities(&self) -> &crate::Capabilities {
        self.inner.capabilities()
    }

    /// The held locks whose names start with `name_prefix` (see
    /// [`crate::Client::locks`]).
    ///
    /// # Errors
    /// As [`crate::Client::locks`].
    pub fn locks(&self, name_prefix: &str) -> Result<Vec<crate::LockStatus>> {
        let client = self.inner.clone();
        let prefix = name_prefix.to_owned();
        self.bridge
            .run("list locks", async move { client.locks(&prefix).await })
    }

    /// The async client underneath, for calls this facade does not wrap.
    /// Its futures must be run by a runtime of the caller's.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }
}

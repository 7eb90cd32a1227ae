//! The builder that checks a client's settings and connects.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::context::Core;
use crate::engine::context::Features;
use crate::error::{Error, Result};
use crate::lock::plain_family::PlainFamily;
use crate::settings::Settings;
use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::settings::deployment::Servers;
use crate::settings::tls_files::TlsFiles;
use crate::transport::topology::{MasterAuth, ReplicaWait, Topology};

/// Longest [`Builder::wait_for_replicas`] timeout accepted: WAIT blocks
/// the client's connection to that master while it runs.
pub(crate) const MAX_REPLICA_WAIT: Duration = Duration::from_secs(60);

/// Builds a [`Client`] with settings other than the defaults: the
/// [`Builder`] whose [`connect`](Builder::connect) is awaited. The blocking
/// facade's `blocking::ClientBuilder` is the same builder, with the same
/// methods, whose `connect` blocks.
pub type ClientBuilder = Builder<Client>;

/// The one builder behind [`ClientBuilder`] and `blocking::ClientBuilder`;
/// `C` is the client that `connect` makes. Every method but `connect` is
/// shared.
///
/// The URL carries the address, database, password and ACL user, as redis-rs
/// reads it: `redis://[USER][:PASSWORD@]HOST[:PORT][/DB]`, or `rediss://` for TLS
/// when redis-rs is built with TLS support. Everything else is a [`Settings`]
/// field, which a running client can change.
///
/// ```no_run
/// # async fn demo() -> redlatch::Result<()> {
/// use std::time::Duration;
///
/// let client = redlatch::Client::builder("redis://app:secret@127.0.0.1:6379/0")
///     .connect_timeout(Duration::from_secs(2))
///     .response_timeout(Duration::from_millis(500))
///     .retries(5)
///     .key_prefix("shop:")
///     .default_lease(Duration::from_secs(10))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until .connect() is called"]
pub struct Builder<C> {
    pub(crate) url: String,
    pub(crate) settings: Settings,
    pub(crate) topology: Topology,
    pub(crate) replica_wait: Option<ReplicaWait>,
    /// Which server features to use where the server offers them.
    features: Features,
    /// `master_auth` was called on a builder that does not use Sentinel.
    misplaced_master_auth: bool,
    /// The client `connect` makes (awaited, or blocking).
    makes: PhantomData<fn() -> C>,
}

impl<C> Builder<C> {
    /// Longest [`wait_for_replicas`](Self::wait_for_replicas) timeout accepted: WAIT blocks
    /// the client's connection to that master while it runs.
    pub const MAX_REPLICA_WAIT: Duration = MAX_REPLICA_WAIT;

    pub(crate) fn new(url: &str) -> Builder<C> {
        Builder {
            url: url.to_owned(),
            settings: Settings::default(),
            topology: Topology {
                servers: Servers::Single(url.to_owned()),
                master_auth: None,
                tls: None,
                cluster_pubsub: ClusterPubSub::default(),
            },
            replica_wait: None,
            features: Features::default(),
            misplaced_master_auth: false,
            makes: PhantomData,
        }
    }

    /// A builder for a Redis Cluster, discovered from any of `nodes` (node
    /// URLs as for [`Client::builder`]; credentials are taken from the first).
    ///
    /// On a cluster the keys of one lock share a hash slot (the channel and
    /// token key wrap the lock key in `{...}`), so every script runs on the
    /// master that owns the lock; wake-ups use sharded pub/sub (`SSUBSCRIBE`,
    /// `SPUBLISH`, Redis 7 or later). Redirections (MOVED, ASK) and the new
    /// topology after a failover are followed by the cluster client. Lock
    /// names whose braces would split a lock's keys over several slots are
    /// refused with [`Error::InvalidName`].
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// let client = redlatch::ClientBuilder::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .connect()
    ///     .await?;
    /// let guard = client.lock("order:42").acquire().await?;
    /// # drop(guard); Ok(()) }
    /// ```
    pub fn cluster<I, S>(nodes: I) -> Builder<C>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let mut builder = Builder::new(nodes.first().map_or("", String::as_str));
        builder.topology.servers = Servers::Cluster(nodes);
        builder
    }

    /// How wake-ups travel on a Redis Cluster (default
    /// [`ClusterPubSub::Sharded`]); set [`ClusterPubSub::Plain`] when
    /// Redisson clients on the same locks run with
    /// `shardedSubscriptionMode = OFF`, so both sides publish and listen
    /// alike. Ignored off a cluster.
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// use redlatch::{ClientBuilder, ClusterPubSub};
    /// let client = ClientBuilder::cluster(["redis://10.0.0.1:7000"])
    ///     .cluster_pubsub(ClusterPubSub::Plain)
    ///     .connect()
    ///     .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn cluster_pubsub(mut self, pubsub: ClusterPubSub) -> Builder<C> {
        self.topology.cluster_pubsub = pubsub;
        self
    }

    /// A builder for the master that Redis Sentinel knows as `master_name`,
    /// asked from any of `sentinels` (Sentinel URLs, `redis://HOST:26379`).
    ///
    /// The master is looked up when connecting, and again after an error
    /// that suggests it moved (connection lost or refused, `READONLY`): a
    /// failover costs the calls in flight at that moment, which fail with a
    /// transient error (acquires retry them by themselves), and the next
    /// calls go to the new master. The subscription connection follows the
    /// same way.
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// let client = redlatch::ClientBuilder::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "locks",
    /// )
    /// .connect()
    /// .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn sentinel<I, S>(sentinels: I, master_name: &str) -> Builder<C>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let sentinels: Vec<String> = sentinels.into_iter().map(Into::into).collect();
        let mut builder = Builder::new(sentinels.first().map_or("", String::as_str));
        builder.topology.servers = Servers::Sentinel {
            sentinels,
            master: master_name.to_owned(),
        };
        builder
    }

    /// Through Sentinel: the credentials of the master (and of the replica
    /// that replaces it), `AUTH [username] password`. The Sentinel URLs carry
    /// the Sentinels' own credentials, if they have any. Elsewhere
    /// credentials go in the URLs, and calling this is refused at
    /// [`connect`](Self::connect) with [`Error::InvalidConfig`].
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// let client = redlatch::ClientBuilder::sentinel(["redis://10.0.0.1:26379"], "locks")
    ///     .master_auth(Some("app"), "s3cret")
    ///     .connect()
    ///     .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn master_auth(mut self, username: Option<&str>, password: &str) -> Self {
        let wanted = MasterAuth {
            username: username.map(str::to_owned),
            password: password.to_owned(),
        };
        match &self.topology.servers {
            Servers::Sentinel { .. } => self.topology.master_auth = Some(wanted),
            _ => self.misplaced_master_auth = true,
        }
        self
    }

    /// After each acquisition, waits until `replicas` replicas of the master
    /// have the lock (Redis `WAIT`), at most `timeout`; when fewer confirm in
    /// time the acquisition is undone and fails with
    /// [`Error::ReplicasNotConfirmed`].
    ///
    /// This narrows, but does not close, the window in which a failover loses
    /// a fresh lock (see `docs/DEPLOYMENT.md`). While a `WAIT` runs, other
    /// commands of this client to that master queue behind it, so keep
    /// `timeout` short (tens of milliseconds on a healthy network). Adds no
    /// round trip: the `WAIT` is pipelined with the acquire script.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let set = testkit::ReplicaSet::start(1).unwrap();
    /// # let url = set.master().url();
    /// use std::time::Duration;
    ///
    /// let client = redlatch::Client::builder(&url) // the master
    ///     .wait_for_replicas(1, Duration::from_millis(500))
    ///     .connect()
    ///     .await?;
    /// let guard = client.lock("invoice:9").acquire().await?; // on the replica too
    /// guard.release().await?;
    ///
    /// # set.replica(0).pause().unwrap();
    /// // With the replica stalled the acquire fails, and leaves no lock behind.
    /// let refused = client.lock("invoice:9").try_acquire().await;
    /// assert!(matches!(refused, Err(redlatch::Error::ReplicasNotConfirmed { .. })));
    /// # set.replica(0).resume().unwrap();
    /// # Ok(()) }
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_wait = Some(ReplicaWait {
            replicas,
            timeout,
            fsync: false,
        });
        self
    }

    /// Counts a fresh acquisition only once it is on disk: the master's
    /// append-only file and those of at least `replicas` replicas fsynced
    /// within `timeout` (`WAITAOF 1 replicas timeout`, pipelined with the
    /// acquire script as for [`wait_for_replicas`](Self::wait_for_replicas),
    /// which it replaces). An acquisition not confirmed in time is undone
    /// and fails with [`Error::ReplicasNotConfirmed`] (the master's own
    /// fsync counted as one of the copies wanted). Needs `WAITAOF`
    /// (Redis or Valkey 7.2 and later) and `appendonly yes` on the master:
    /// [`connect`](Self::connect) fails with [`Error::InvalidConfig`] where
    /// either is missing. `replicas` may be 0 (the master's own fsync only).
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// use std::time::Duration;
    ///
    /// let client = redlatch::Client::builder("redis://127.0.0.1:6379")
    ///     .wait_for_fsync(1, Duration::from_millis(500))
    ///     .connect()
    ///     .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn wait_for_fsync(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_wait = Some(ReplicaWait {
            replicas,
            timeout,
            fsync: true,
        });
        self
    }

    /// Whether scripts run as redlatch's function library where the server
    /// offers functions (default `true`): loaded once at connect with
    /// `FUNCTION LOAD`, they survive a restart with persistence, a failover
    /// and `SCRIPT FLUSH`, so no request meets NOSCRIPT. With `false`, or
    /// where the server lacks or refuses functions, scripts run by EVALSHA
    /// and are loaded again on NOSCRIPT. [`Client::capabilities`] says which.
    ///
    /// [`Client::capabilities`]: crate::Client::capabilities
    pub fn script_functions(mut self, on: bool) -> Self {
        self.features.script_functions = on;
        self
    }

    /// Whether held locks learn at once that their key no longer carries
    /// them (default `true`): deleted, force-unlocked (by redlatch or
    /// Redisson), flushed, expired, or lost in a restart or failover. A
    /// connection of its own per client watches the held keys by
    /// client-side caching (RESP3 `CLIENT TRACKING`) and marks such a hold
    /// lost within milliseconds ([`Guard::lost`] resolves), where the
    /// renewals alone find it within a third of the lease. Each hold that
    /// lives longer than 10 ms costs the server one read, and each change
    /// of its key (renewals included) one push and one read. On a cluster,
    /// a connection per master that serves a held key, and a hold is called
    /// lost only on the word of the node serving its slot now (a slot
    /// migration or a failover is no loss). Servers that refuse RESP3 or
    /// `CLIENT TRACKING` (Redis before 6, an ACL without `client`) keep the
    /// renewals alone.
    ///
    /// [`Guard::lost`]: crate::Guard::lost
    pub fn watch_holds(mut self, on: bool) -> Self {
        self.features.watch_holds = on;
        self
    }

    /// Accepts a server without scripting (Valkey 9.1 without its Lua
    /// module) when it serves the [`TokenLock`](crate::TokenLock) without
    /// scripts (`SET … IFEQ`, and `DELIFEQ` or `DELEX … IFEQ`): the token
    /// lock is then the one lock the client can use (a fenced one aside).
    /// Off by default: such a server is refused at connect with
    /// [`Error::ServerLacks`](crate::Error::ServerLacks), since every other
    /// lock runs as a script.
    pub fn token_lock_without_scripting(mut self, on: bool) -> Self {
        self.features.token_lock_without_scripting = on;
        self
    }

    /// Whether waiters look for wait-for cycles (default `false`): an
    /// acquire whose wait would close one (its lock's holder waits,
    /// directly or through others, for a lock its own party holds) fails
    /// with [`Error::Deadlock`](crate::Error::Deadlock) naming the cycle,
    /// rather than waiting for ever (`crate::deadlock`, and the README,
    /// "Deadlock detection", for which holds count as one party). Costs
    /// nothing on an acquire that does not wait; a waiter runs one script
    /// after each busy attempt and keeps one expiring key while it waits.
    /// Off by default: not every user needs it on the contended path, and
    /// its party rules (one task is one party, one owner name is one
    /// party) refuse waits that are no deadlock where those rules do not
    /// hold: futures of one task joined together, a guard handed to
    /// another task, two processes sharing one owner name. Turn it on
    /// where each task (or named owner) waits in turn; `redlatch run` does.
    pub fn deadlock_detection(mut self, on: bool) -> Self {
        self.features.deadlock_detection = on;
        self
    }

    /// Whether the client asks the server not to evict its command and
    /// watch connections (`CLIENT NO-EVICT ON`, default `true`) when the
    /// server bounds its clients' memory (`maxmemory-clients`): the
    /// renewals and the loss watch then keep their connections when other
    /// clients are closed. Where the server lacks it (before 7) or refuses
    /// it (an ACL without `client`, a managed service), the client works as
    /// before; [`Client::capabilities`] says which.
    ///
    /// [`Client::capabilities`]: crate::Client::capabilities
    pub fn no_evict(mut self, on: bool) -> Self {
        self.features.no_evict = on;
        self
    }

    /// Whether this client names itself as the holder of its locks
    /// (default `true`): host, process id, program, since when, and the
    /// [`holder_purpose`](Self::holder_purpose), read back by
    /// [`Lock::status`](crate::Lock::status) and [`Client::locks`] as
    /// [`Holder::identity`](crate::Holder::identity). A hold is named once
    /// it has lasted about 50 ms, in one hash per client beside the locks
    /// (`<key prefix>redlatch_holder:{<client id>}`, docs/REDIS-DATA.md),
    /// and taken out within a second after it ends. Where the server
    /// refuses the write (an ACL without that key), holders go unnamed.
    ///
    /// [`Client::locks`]: crate::Client::locks
    #[cfg(feature = "holder-records")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holder-records")))]
    pub fn holder_identity(mut self, on: bool) -> Self {
        self.features.holder_identity = on;
        self
    }

    /// What this client holds its locks for, shown beside its identity
    /// (e.g. `"nightly report"`); none by default.
    #[cfg(feature = "holder-records")]
    #[cfg_attr(docsrs, doc(cfg(feature = "holder-records")))]
    pub fn holder_purpose(mut self, purpose: impl Into<String>) -> Self {
        self.features.holder_purpose = Some(purpose.into());
        self
    }

    /// Certificates for `rediss://` URLs: a CA to trust instead of the
    /// system's store, and a client certificate for servers that ask for one
    /// (`tls-auth-clients yes`). Needs the `tls` feature; without it
    /// [`connect`](Self::connect) refuses TLS with [`Error::InvalidConfig`].
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// let client = redlatch::Client::builder("rediss://app:s3cret@redis.internal:6380")
    ///     .tls(redlatch::TlsFiles::default().with_ca("/etc/redis/ca.crt"))
    ///     .connect()
    ///     .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.topology.tls = Some(files);
        self
    }

    /// Replaces all settings at once (for example from `Settings::load`);
    /// the other builder methods change one field.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Time allowed to open a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// Time allowed for Redis to answer a call (default 3 s). A call that
    /// waits longer fails with [`Error::ResponseTimeout`].
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.settings.response_timeout = timeout;
        self
    }

    /// Retries after a connection error (default 3); see [`RetryPolicy`](crate::RetryPolicy).
    pub fn retries(mut self, retries: u32) -> Self {
        self.settings.retry.attempts = retries;
        self
    }

    /// Delay before the first retry (default 100 ms); it doubles at each
    /// retry, up to the policy's `max_delay` (2 s).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.settings.retry.base_delay = delay;
        self.settings.retry.max_delay = self.settings.retry.max_delay.max(delay);
        self
    }

    /// Prefix added to every lock name to form its key (default none).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.key_prefix = prefix.into();
        self
    }

    /// Keep one fencing counter per lock name (`redisson_lock_token:{KEY}`,
    /// Redisson's `RFencedLock` layout) instead of the shared counter
    /// (default off): for names that Redisson's `RFencedLock` locks too
    /// ([`Settings::per_name_token_counters`](crate::Settings::per_name_token_counters)).
    pub fn per_name_token_counters(mut self, on: bool) -> Self {
        self.settings.per_name_token_counters = on;
        self
    }

    /// Publish the unlock message on every last release of a reentrant
    /// lock (default off: only when a redlatch waiter marked the hold), for
    /// names that Redisson's `RLock` waits on too
    /// ([`Settings::redisson_waiters`](crate::Settings::redisson_waiters)).
    pub fn redisson_waiters(mut self, on: bool) -> Self {
        self.settings.redisson_waiters = on;
        self
    }

    /// Lease of locks renewed by the watchdog (default 30 s, at least 30 ms).
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.settings.default_lease = lease;
        self
    }

    /// The lean profile, in one call: no holder records
    /// (`holder_identity(false)`, where the `holder-records` feature is on)
    /// and no loss watch ([`watch_holds(false)`](Self::watch_holds)). The client then keeps
    /// two connections on one server instead of three, writes nothing
    /// beside the locks but what their own protocol needs, and each hold
    /// costs the server no read of its own; in exchange a lock lost
    /// outside the protocol (deleted, flushed, failed over) is noticed by
    /// the next renewal (within a third of the lease) rather than within
    /// milliseconds, and [`Holder::identity`](crate::Holder::identity) is
    /// `None` for this client's holds. The locks, fencing, wake-ups and
    /// the watchdog are unchanged. Later calls may turn either back on.
    ///
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// let client = redlatch::Client::builder("redis://127.0.0.1:6379")
    ///     .lean()
    ///     .connect()
    ///     .await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub fn lean(self) -> Self {
        #[cfg(feature = "holder-records")]
        let this = self.holder_identity(false);
        #[cfg(not(feature = "holder-records"))]
        let this = self;
        this.watch_holds(false)
    }

    fn validate(&self) -> Result<()> {
        self.settings.validate()?;
        if self.misplaced_master_auth {
            return Err(Error::InvalidConfig(
                "master_auth applies to sentinel; put credentials in the URL".to_owned(),
            ));
        }
        if let Some(tls) = &self.topology.tls {
            tls.validate()?;
        }
        self.topology.servers.check_shape()?;
        if let Servers::Redlock(_) = self.topology.servers {
            return Err(crate::transport::topology::redlock_refused());
        }
        if let Some(wait) = self.replica_wait {
            if wait.replicas == 0 && !wait.fsync {
                return Err(Error::InvalidConfig(
                    "wait_for_replicas needs at least one replica".to_owned(),
                ));
            }
            // WAIT counts whole milliseconds, and 0 would mean "forever".
            if wait.timeout.as_millis() == 0 || wait.timeout > MAX_REPLICA_WAIT {
                return Err(Error::InvalidDuration {
                    what: "replica wait timeout",
                    value: wait.timeout,
                    reason: "must be between 1 ms and 60 s",
                });
            }
        }
        Ok(())
    }

    /// The same settings, for a client of another kind (a blocking
    /// builder's, made async for the runtime that serves it).
    #[cfg(feature = "blocking")]
    pub(crate) fn making<D>(self) -> Builder<D> {
        Builder {
            url: self.url,
            settings: self.settings,
            topology: self.topology,
            replica_wait: self.replica_wait,
            features: self.features,
            misplaced_master_auth: self.misplaced_master_auth,
            makes: PhantomData,
        }
    }
}

// A client is made only through its builder: the client's own file names
// no builder, so this file stands above it.
impl Client {
    /// Connects with default [`Settings`] (30 s lease, 10 s connect timeout, 3 s
    /// response timeout, 3 retries, no key prefix).
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
}

impl ClientBuilder {
    /// Checks the settings and connects.
    ///
    /// Costs one connection for commands (opened now), one for
    /// subscriptions (opened in the background, reconnected as needed) and
    /// one for the loss watch ([`watch_holds`](Self::watch_holds); none when
    /// [`lean`](Self::lean)): three per client. On a cluster the first two
    /// are each a connection per node it talks to, and the watch one per
    /// master that serves a held lock's slot;
    /// through Sentinel, each lookup of the master also opens a short-lived
    /// connection to a Sentinel and to the master it names. Everything a
    /// client keeps on the server is tabled in the README, "What redlatch
    /// puts on your Redis".
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] or
    /// [`Error::InvalidDuration`] for bad settings (also: a server that
    /// refuses the `WAIT` or `WAITAOF` that `wait_for_replicas` or
    /// `wait_for_fsync` need), [`Error::TlsFile`] for a TLS file that
    /// cannot be used, [`Error::Unavailable`] when Redis cannot be reached,
    /// [`Error::ConnectTimeout`] when one server did not answer within the
    /// connect timeout, [`Error::TlsCertificate`] when a certificate is
    /// refused in the handshake, [`Error::Redis`] when the server refuses
    /// the credentials.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the connection attempt; nothing is left behind.
    pub async fn connect(self) -> Result<Client> {
        self.validate()?;
        let Builder {
            url,
            settings,
            topology,
            replica_wait,
            features,
            ..
        } = self;
        // Straight to the core: one async layer less keeps callers' futures shallow.
        let core = Core::open(
            &url,
            settings,
            &topology,
            replica_wait,
            features,
            crate::primitives::library(),
        )
        .await?;
        let core = Arc::new(core);
        let plain = PlainFamily::for_client(&core);
        Ok(Client { core, plain })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn bad_settings_are_refused_before_connecting() {
        let check = |builder: ClientBuilder| builder.validate();
        let zero_timeout = ClientBuilder::new("redis://127.0.0.1").connect_timeout(Duration::ZERO);
        assert!(matches!(
            check(zero_timeout),
            Err(Error::InvalidDuration {
                what: "connect timeout",
                ..
            })
        ));
        let short_lease =
            ClientBuilder::new("redis://127.0.0.1").default_lease(Duration::from_millis(5));
        assert!(matches!(
            check(short_lease),
            Err(Error::InvalidDuration {
                what: "default lease",
                ..
            })
        ));
        let many_retries = ClientBuilder::new("redis://127.0.0.1").retries(1000);
        assert!(matches!(check(many_retries), Err(Error::InvalidConfig(_))));
        assert!(check(ClientBuilder::new("redis://127.0.0.1")).is_ok());
    }

    #[test]
    fn the_lean_profile_turns_off_holder_records_and_the_loss_watch() {
        let lean = ClientBuilder::new("redis://127.0.0.1").lean();
        assert!(!lean.features.watch_holds);
        #[cfg(feature = "holder-records")]
        assert!(!lean.features.holder_identity);
        assert!(lean.features.script_functions && lean.features.no_evict);
        let one_back = ClientBuilder::new("redis://127.0.0.1")
            .lean()
            .watch_holds(true);
        assert!(one_back.features.watch_holds);
    }

    #[test]
    fn bad_topologies_and_replica_waits_are_refused() {
        let check = |builder: ClientBuilder| builder.validate();
        assert!(matches!(
            check(ClientBuilder::cluster(Vec::<String>::new())),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            check(ClientBuilder::sentinel(["redis://127.0.0.1:26379"], "")),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            check(ClientBuilder::sentinel(Vec::<String>::new(), "locks")),
            Err(Error::InvalidConfig(_))
        ));
        let none =
            ClientBuilder::new("redis://127.0.0.1").wait_for_replicas(0, Duration::from_millis(50));
        assert!(matches!(check(none), Err(Error::InvalidConfig(_))));
        let instant =
            ClientBuilder::new("redis://127.0.0.1").wait_for_replicas(1, Duration::from_micros(10));
        assert!(matches!(
            check(instant),
            Err(Error::InvalidDuration {
                what: "replica wait timeout",
                ..
            })
        ));
        let ok =
            ClientBuilder::new("redis://127.0.0.1").wait_for_replicas(1, Duration::from_millis(50));
        assert!(check(ok).is_ok());
    }
}

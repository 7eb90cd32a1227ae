//! `seckill serve`: one instance of the shop, as a process or in-process.
//!
//! [`start`] brings an instance up inside the calling process: it connects to
//! the database and creates the schema, connects to Redis, binds the port,
//! and serves until [`Service::shutdown`] (graceful) or [`Service::abort`]
//! (a crash, for tests). Each instance runs on a Tokio runtime of its own, so
//! aborting it drops every task it has at once (requests in flight, the
//! reserve consumer, connections), as a killed process would. [`run`] is the
//! command: [`start`], then wait for SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::BoxError;
use crate::api::auth::{Auth, AuthConfig, AuthKind};
use crate::api::rate_limit::{self, RateLimit, RateLimits};
use crate::api::sold_out::SoldOutFlags;
use crate::api::{self, AdminAccess, AppState};
use crate::db::Db;
use crate::db::schema::SchemaKind;
use crate::http_server;
use crate::id_worker::IdWorker;
use crate::lifecycle::expiry;
use crate::reserve_consumer::{self, ConsumerSettings};
use crate::sale_window::SaleWindows;
use crate::strategy::{self, OrderContext, StrategyKind};

/// How long a graceful shutdown waits for requests in flight and the
/// consumer's batch before dropping what is left.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// How long a sale's per-user fencing state outlives it: writes under a
/// user's lock are refused from 5 min after the end, the state goes at 10.
const FENCE_KEEP: Duration = Duration::from_secs(10 * 60);

/// `seckill serve`: run one instance of the HTTP service.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where Redis runs (ids, locks, reservations): --redis URL, or
    /// --redis-cluster / --sentinel with --sentinel-master, and TLS files
    #[command(flatten)]
    pub deployment: redlatch::DeploymentArgs,
    /// Database URL: sqlite://FILE?mode=rwc, postgres://..., mysql://...
    #[arg(long, default_value = "sqlite://seckill.db?mode=rwc")]
    pub database: String,
    /// How orders are placed.
    #[arg(long, value_enum, default_value_t = StrategyKind::RedisLock)]
    pub strategy: StrategyKind,
    /// This instance's id (health, metrics, reserve consumer name).
    #[arg(long, default_value_t = 1)]
    pub instance: u16,
    /// Use the lab schema: no UNIQUE / CHECK constraints, so the teaching
    /// strategies' races corrupt the data visibly. Needs a database of its own.
    #[arg(long)]
    pub lab: bool,
    /// reserve: take over another consumer's pending orders idle this long.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub claim_idle: Duration,
    /// redis-lock: longest wait for a user's lock before answering 503 busy;
    /// 0s (the default, the seed's tryLock): a held lock answers 409
    /// in_progress at once.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub lock_wait: Duration,
    /// A pending order not paid within this time expires and its unit goes
    /// back on sale.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "15m")]
    pub payment_timeout: Duration,
    /// On SIGINT/SIGTERM, answer /health/ready with 503 for this long before
    /// closing the listener, so a load balancer stops sending new requests
    /// first; requests in flight then finish.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub drain: Duration,
    /// Lab: write without fencing tokens, to show what they prevent.
    #[arg(long)]
    pub no_fencing: bool,
    /// Lab: redis-lock stalls this long between its check and its write,
    /// after printing "seckill: stalled before write" on stderr.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    pub lab_stall_before_write: Option<Duration>,
    /// redlatch settings file (TOML: lease, retries, timeouts, and a [redis]
    /// section naming the deployment when no server flag is given), applied
    /// at start and followed while the service runs; a bad change is logged
    /// and the settings in force stay.
    #[arg(long, value_name = "FILE")]
    pub lock_config: Option<std::path::PathBuf>,
    /// reserve: an entry the database refused after this many deliveries
    /// goes to the dead-letter stream.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub consumer_max_tries: u32,
    /// reserve: the first wait before retrying entries the database refused
    /// (doubling after each failed step, up to 10 s).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "500ms")]
    pub consumer_backoff: Duration,
    /// reserve: how often acknowledged entries are trimmed from the stream.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub trim_every: Duration,
    /// Bearer token for POST /vouchers and /admin/*. Without it /admin/*
    /// answers only on a loopback listen address.
    #[arg(
        long,
        value_name = "T",
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    pub admin_token: Option<String>,
    /// How users are known: `header` (X-User-Id as sent, for the lab, the
    /// demo and tests; refused unless --listen is a loopback address) or
    /// `jwt` (Authorization: Bearer, HS256, user id in `sub`).
    #[arg(long, value_enum, default_value_t = AuthKind::Header)]
    pub auth: AuthKind,
    /// --auth jwt: the HS256 secret tokens are signed with.
    #[arg(
        long,
        env = "SECKILL_JWT_SECRET",
        hide_env_values = true,
        required_if_eq("auth", "jwt")
    )]
    pub jwt_secret: Option<String>,
    /// At most N order, pay and cancel requests a second per user, on each instance (429
    /// rate_limited beyond). Off when not given.
    #[arg(long, value_name = "N/s")]
    pub rate_limit: Option<RateLimit>,
    /// How long a voucher seen sold out is answered 410 from memory before
    /// one click goes through to look again (0s: never from memory).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub sold_out_recheck: Duration,
    /// At most N requests worked on at once; beyond, 503 `overloaded` with
    /// Retry-After (health checks and metrics always answer).
    #[arg(long, value_name = "N", default_value_t = api::in_flight::DEFAULT_MAX_IN_FLIGHT as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_in_flight: u32,
    /// New Idempotency-Keys one caller (a user, the admin) may claim a day;
    /// beyond, 429 `rate_limited` until its day is over.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idempotency_keys_per_day: u64,
}

/// What an instance is: where it listens and what it talks to.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Address to listen on; port 0 picks a free one (see [`Service::addr`]).
    pub listen: SocketAddr,
    /// Where Redis runs: one server, a cluster or a Sentinel group.
    pub redis: redlatch::Deployment,
    /// Database URL.
    pub database_url: String,
    /// How orders are placed.
    pub strategy: StrategyKind,
    /// This instance's id.
    pub instance: u16,
    /// Lab schema (no constraints) instead of the normal one.
    pub lab_schema: bool,
}

/// Settings with defaults most callers keep: timings that tests shorten,
/// and how the API is protected. See [`start_tuned`].
#[derive(Clone, Debug)]
pub struct Tuning {
    /// reserve: pending entries idle this long are claimed by another
    /// instance's consumer (5 s).
    pub claim_idle: Duration,
    /// redis-lock: longest wait for a user's lock (zero: none, 409 at once).
    pub lock_wait: Duration,
    /// Pending orders older than this expire (15 min).
    pub payment_timeout: Duration,
    /// How long a graceful shutdown answers "not ready" before it stops
    /// accepting (zero).
    pub drain: Duration,
    /// Writes under a lock carry its fencing token (true).
    pub fencing: bool,
    /// Lab: see [`OrderContext::stall_before_write`] (none).
    pub stall_before_write: Option<Duration>,
    /// A redlatch settings file (lease, retries, timeouts, key prefix) the
    /// instance's lock client follows while it runs; `None`: built-in settings.
    pub lock_settings: Option<std::path::PathBuf>,
    /// reserve: deliveries of an entry the database keeps refusing before it
    /// is dead-lettered (10).
    pub consumer_max_tries: u32,
    /// reserve: the first backoff after database failures (500 ms).
    pub consumer_backoff: Duration,
    /// reserve: how often acknowledged entries are trimmed (10 s).
    pub trim_every: Duration,
    /// A fault for tests (zero otherwise): the reserve consumer sleeps this
    /// long after each entry it writes, as over a slow database.
    pub consumer_write_delay: Duration,
    /// `--admin-token`: needed by POST /vouchers and /admin/* when set.
    pub admin_token: Option<String>,
    /// How users are known ([`AuthConfig::Header`]: `X-User-Id`, which
    /// needs a loopback listen address).
    pub auth: AuthConfig,
    /// Order requests a second per user on this instance (`None`: no limit).
    pub rate_limit: Option<RateLimit>,
    /// How long a sold-out voucher is answered from memory before one
    /// click looks again (1 s; zero: never from memory).
    pub sold_out_recheck: Duration,
    /// A connection that takes longer to send a request's headers (from
    /// opening, or idle after an answer) is closed (10 s).
    pub header_timeout: Duration,
    /// Requests worked on at once, beyond which 503 `overloaded` (1024).
    pub max_in_flight: usize,
    /// New idempotency keys one caller may claim a day (1000).
    pub idempotency_keys_per_day: u64,
    /// How long after a sale's end its per-user fencing state is kept
    /// (10 min; see `strategy/redis_lock.rs`).
    pub fence_keep: Duration,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            claim_idle: Duration::from_secs(5),
            lock_wait: Duration::ZERO,
            payment_timeout: Duration::from_secs(15 * 60),
            drain: Duration::ZERO,
            fencing: true,
            stall_before_write: None,
            lock_settings: None,
            consumer_max_tries: 10,
            consumer_backoff: Duration::from_millis(500),
            trim_every: Duration::from_secs(10),
            consumer_write_delay: Duration::ZERO,
            admin_token: None,
            auth: AuthConfig::Header,
            rate_limit: None,
            sold_out_recheck: Duration::from_secs(1),
            header_timeout: http_server::HEADER_TIMEOUT,
            max_in_flight: api::in_flight::DEFAULT_MAX_IN_FLIGHT,
            idempotency_keys_per_day: 1000,
            fence_keep: FENCE_KEEP,
        }
    }
}

/// A running instance. Dropping it without [`shutdown`](Service::shutdown)
/// stops it abruptly, like [`abort`](Service::abort).
pub struct Service {
    addr: SocketAddr,
    instance: u16,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: CancellationToken,
    finished: Option<oneshot::Receiver<()>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("addr", &self.addr)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// The address it accepts connections on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, the base of every route.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The instance id it was started with.
    pub fn instance(&self) -> u16 {
        self.instance
    }

    /// Stops accepting, lets requests in flight finish, lets the reserve
    /// consumer acknowledge its batch, closes the pools; then stops. Gives up
    /// waiting after 15 s.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(finished) = self.finished.take() {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, finished).await;
        }
        self.stop_runtime();
    }

    /// Drops everything at once, like a crash: requests in flight get a
    /// broken connection, the consumer's unacknowledged entries stay pending,
    /// open transactions roll back, held Redis locks stay until their lease
    /// runs out.
    pub fn abort(mut self) {
        self.stop_runtime();
    }

    fn stop_runtime(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop_runtime();
    }
}

/// Starts an instance in this process with default [`Tuning`]; returns once
/// it accepts connections.
///
/// Creates the schema if needed (idempotent; instances starting together
/// are serialized by a database lock).
///
/// # Errors
/// The database, Redis or the address cannot be used, or the database holds
/// the other schema kind.
pub async fn start(config: ServiceConfig) -> Result<Service, BoxError> {
    start_tuned(config, Tuning::default()).await
}

/// As [`start`], with timings of one's own.
///
/// # Errors
/// As [`start`].
pub async fn start_tuned(config: ServiceConfig, tuning: Tuning) -> Result<Service, BoxError> {
    let instance = config.instance;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(format!("seckill-{instance}"))
        .enable_all()
        .build()?;
    let shutdown = CancellationToken::new();
    let (ready_tx, ready_rx) = oneshot::channel();
    let (finished_tx, finished_rx) = oneshot::channel();
    runtime.spawn(instance_main(
        config,
        tuning,
        shutdown.clone(),
        ready_tx,
        finished_tx,
    ));
    let mut service = Service {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        instance,
        runtime: Some(runtime),
        shutdown,
        finished: Some(finished_rx),
    };
    match ready_rx.await {
        Ok(Ok(addr)) => {
            service.addr = addr;
            Ok(service)
        }
        Ok(Err(error)) => Err(error),
        Err(_) => Err("the instance stopped while starting".into()),
    }
}

/// `seckill serve`: starts an instance and serves until SIGINT or SIGTERM.
///
/// # Errors
/// As [`start`].
pub async fn run(args: ServeArgs) -> Result<u8, BoxError> {
    let config = ServiceConfig {
        listen: args.listen,
        // Flags first, then the settings file's [redis] section, as the
        // redlatch CLI reads them.
        redis: args
            .deployment
            .deployment(match &args.lock_config {
                Some(path) => redlatch::Deployment::load(path)
                    .map_err(|error| format!("--lock-config: {error}"))?,
                None => None,
            })
            .map_err(|error| format!("redis: {error}"))?,
        database_url: args.database,
        strategy: args.strategy,
        instance: args.instance,
        lab_schema: args.lab,
    };
    let tuning = Tuning {
        claim_idle: args.claim_idle,
        lock_wait: args.lock_wait,
        payment_timeout: args.payment_timeout,
        drain: args.drain,
        fencing: !args.no_fencing,
        stall_before_write: args.lab_stall_before_write,
        lock_settings: args.lock_config,
        consumer_max_tries: args.consumer_max_tries,
        consumer_backoff: args.consumer_backoff,
        trim_every: args.trim_every,
        consumer_write_delay: Duration::ZERO,
        admin_token: args.admin_token,
        auth: match args.auth {
            AuthKind::Header => AuthConfig::Header,
            AuthKind::Jwt => AuthConfig::Jwt {
                secret: args.jwt_secret.unwrap_or_default(),
            },
        },
        rate_limit: args.rate_limit,
        sold_out_recheck: args.sold_out_recheck,
        header_timeout: http_server::HEADER_TIMEOUT,
        max_in_flight: args.max_in_flight as usize,
        idempotency_keys_per_day: args.idempotency_keys_per_day,
        fence_keep: FENCE_KEEP,
    };
    let schema = if config.lab_schema { "lab" } else { "normal" };
    let strategy = config.strategy;
    let service = start_tuned(config, tuning).await?;
    eprintln!(
        "seckill: instance {} serving on {} (strategy {strategy}, {schema} schema)",
        service.instance(),
        service.url()
    );
    wait_for_stop_signal().await?;
    eprintln!("seckill: stopping");
    service.shutdown().await;
    Ok(0)
}

async fn wait_for_stop_signal() -> Result<(), BoxError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        outcome = tokio::signal::ctrl_c() => outcome?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

/// Everything an instance runs, on its own runtime.
async fn instance_main(
    config: ServiceConfig,
    tuning: Tuning,
    shutdown: CancellationToken,
    ready: oneshot::Sender<Result<SocketAddr, BoxError>>,
    finished: oneshot::Sender<()>,
) {
    let booted = match boot(&config, &tuning).await {
        Ok(booted) => booted,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    let Booted {
        listener,
        state,
        consumer,
        _settings_watcher,
    } = booted;
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(error) => {
            let _ = ready.send(Err(error.into()));
            return;
        }
    };
    let db = state.ctx.db.clone();
    let consumer = consumer.map(|(conn, settings, client)| {
        let shutdown = shutdown.clone();
        let db = db.clone();
        let health = state.consumer_health.clone().unwrap_or_default();
        tokio::spawn(async move {
            reserve_consumer::run(db, conn, settings, health, shutdown).await;
            drop(client);
        })
    });
    let sweeper = {
        let sweeper_state = state.clone();
        let stop = shutdown.clone();
        // Only `reserve` keeps a Redis stock to give units back to.
        let redis_stock = (state.kind == StrategyKind::Reserve).then(|| state.ctx.redis.clone());
        tokio::spawn(expiry::run(
            db.clone(),
            redis_stock,
            tuning.payment_timeout,
            stop,
            move |voucher_id| sweeper_state.stock_returned(voucher_id),
        ))
    };
    let drain = tuning.drain;
    let draining_state = state.clone();
    let stop_accepting = shutdown.clone();
    let header_timeout = tuning.header_timeout;
    let server = http_server::serve(listener, api::router(state), header_timeout, async move {
        stop_accepting.cancelled().await;
        // Not ready first, so a load balancer moves away; then close.
        draining_state.start_draining();
        tokio::time::sleep(drain).await;
    });
    let _ = ready.send(Ok(addr));
    server.await;
    if let Some(consumer) = consumer {
        let _ = consumer.await;
    }
    let _ = sweeper.await;
    db.close().await;
    let _ = finished.send(());
}

/// A booted instance, not yet serving.
struct Booted {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    /// The reserve consumer's own connection and settings, for `reserve`
    /// only, and the client that keeps that connection.
    consumer: Option<(
        redlatch::RedisConnection,
        ConsumerSettings,
        redlatch::Client,
    )>,
    /// Keeps the lock client in step with `--lock-config` while serving.
    _settings_watcher: Option<redlatch::SettingsWatcher>,
}

async fn boot(config: &ServiceConfig, tuning: &Tuning) -> Result<Booted, BoxError> {
    // First: a header-mode instance on a public address must not come up at all.
    let auth = Auth::new(&tuning.auth, config.listen)?;
    let db = Db::connect(&config.database_url)
        .await
        .map_err(|error| format!("cannot open the database: {error}"))?;
    let kind = if config.lab_schema {
        SchemaKind::Lab
    } else {
        SchemaKind::Normal
    };
    db.prepare_schema(kind)
        .await
        .map_err(|error| format!("database schema: {error}"))?;
    if config.redis.is_redlock() {
        // The stock, the buyers and the order stream must live in one place:
        // independent Redlock masters would each hold a different stock.
        return Err(format!(
            "seckill serve needs one Redis deployment (a server, a cluster or a \
             Sentinel group) for its stock and order stream; {} are Redlock masters",
            config.redis.describe()
        )
        .into());
    }
    // A lease of 10 s (renewed every ~3.3 s while held): a crashed instance's
    // per-user locks free themselves within 10 s instead of the default 30.
    let locks = config
        .redis
        .builder(redis_settings(Duration::from_secs(3)))
        .map_err(|error| format!("redis: {error}"))?
        .default_lease(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|error| format!("cannot connect to redis: {error}"))?;
    // Ids, stock and stream share the locks' connection: it follows the
    // deployment (slots, Sentinel failovers) as the locks do.
    let redis = locks.redis_connection();
    let settings_watcher = match &tuning.lock_settings {
        Some(path) => Some(
            locks
                .watch_settings(path)
                .map_err(|error| format!("--lock-config: {error}"))?,
        ),
        None => None,
    };
    let consumer = if config.strategy == StrategyKind::Reserve {
        reserve_consumer::ensure_group(&mut redis.clone())
            .await
            .map_err(|error| format!("cannot create the reserve consumer group: {error}"))?;
        let settings = ConsumerSettings {
            max_tries: tuning.consumer_max_tries.max(1),
            backoff: tuning.consumer_backoff,
            trim_every: tuning.trim_every,
            write_delay: tuning.consumer_write_delay,
            ..ConsumerSettings::for_instance(config.instance, tuning.claim_idle)
        };
        // A client of its own: its blocking reads must not hold up the
        // locks' calls, and may take longer than their response timeout.
        let client = config
            .redis
            .builder(redis_settings(settings.block + Duration::from_secs(5)))
            .map_err(|error| format!("redis: {error}"))?
            .connect()
            .await
            .map_err(|error| format!("cannot connect the reserve consumer to redis: {error}"))?;
        Some((client.redis_connection(), settings, client))
    } else {
        None
    };
    let metrics = crate::metrics::handle();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let ctx = OrderContext {
        windows: SaleWindows::new(db.clone()),
        db,
        ids: IdWorker::new(redis.clone()),
        redis,
        locks,
        lock_wait: tuning.lock_wait,
        fencing: tuning.fencing,
        stall_before_write: tuning.stall_before_write,
        fence_keep: tuning.fence_keep,
    };
    let state = Arc::new(AppState {
        ctx,
        strategy: strategy::build(config.strategy),
        kind: config.strategy,
        instance: config.instance,
        metrics,
        draining: Default::default(),
        admin: AdminAccess {
            token: tuning.admin_token.clone(),
            loopback: config.listen.ip().is_loopback(),
        },
        auth,
        rate_limits: RateLimits::new(tuning.rate_limit),
        sold_out: SoldOutFlags::new(tuning.sold_out_recheck),
        payment_timeout: tuning.payment_timeout,
        in_flight: api::in_flight::InFlight::new(tuning.max_in_flight),
        idempotency_keys_per_day: tuning.idempotency_keys_per_day,
        consumer_health: consumer.as_ref().map(|_| Default::default()),
    });
    rate_limit::spawn_upkeep(&state);
    Ok(Booted {
        listener,
        state,
        consumer,
        _settings_watcher: settings_watcher,
    })
}

/// The instance's Redis settings: each call bounded by `response_timeout`
/// (a stalled Redis gives 503s rather than hung requests; the connection
/// lent to the shop follows it too), 5 s to connect, and one retry: a click
/// is better answered 503 with `Retry-After` at once than held through
/// three retries of an outage (the client retries, the page says so).
fn redis_settings(response_timeout: Duration) -> redlatch::Settings {
    let mut settings = redlatch::Settings::default();
    settings.connect_timeout = Duration::from_secs(5);
    settings.response_timeout = response_timeout;
    settings.retry.attempts = 1;
    settings
}

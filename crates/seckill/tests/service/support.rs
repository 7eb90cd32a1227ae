//! What the service tests share: a database per test on each backend, a
//! throwaway Redis, instances, and a client that clicks.
//!
//! SQLite always runs (a file in a temp dir). PostgreSQL and MySQL/MariaDB
//! run when `SECKILL_TEST_POSTGRES_URL` / `SECKILL_TEST_MYSQL_URL` are set:
//! each test creates a database of its own with a random name on that
//! server and drops it at the end, even when the test fails.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use seckill::db::Db;
use seckill::serve::{Service, ServiceConfig, Tuning};
use seckill::strategy::StrategyKind;
use serde_json::{Value, json};
use sqlx::{Connection, Executor};

/// The database servers a test can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    fn env_var(self) -> Option<&'static str> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres => Some("SECKILL_TEST_POSTGRES_URL"),
            Backend::MySql => Some("SECKILL_TEST_MYSQL_URL"),
        }
    }
}

/// A database of one's own for one test; dropped (server backends) or
/// deleted (SQLite) with the value.
pub struct TestDatabase {
    pub backend: Backend,
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Server { admin_url: String, name: String },
}

impl TestDatabase {
    /// A fresh database on `backend`, or `None` (with a notice) when that
    /// backend's URL is not set.
    pub async fn create(backend: Backend, test: &str) -> Option<TestDatabase> {
        let Some(var) = backend.env_var() else {
            let dir = tempfile::tempdir().expect("temp dir");
            let url = format!(
                "sqlite://{}?mode=rwc",
                dir.path().join("seckill.db").display()
            );
            return Some(TestDatabase {
                backend,
                url,
                cleanup: Cleanup::Dir(dir),
            });
        };
        let Ok(admin_url) = std::env::var(var) else {
            eprintln!("notice: {var} is not set; skipping {test} on {backend:?}");
            return None;
        };
        let name = unique_name();
        run_admin(backend, &admin_url, &format!("CREATE DATABASE {name}")).await;
        Some(TestDatabase {
            backend,
            url: with_database(&admin_url, &name),
            cleanup: Cleanup::Server { admin_url, name },
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Cleanup::Server { admin_url, name } = &self.cleanup {
            let (backend, admin_url, owned_name) = (self.backend, admin_url.clone(), name.clone());
            // Drop may run inside the test's runtime: use a thread of our own.
            let dropped = std::thread::spawn(move || {
                let name = owned_name;
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let statement = match backend {
                    Backend::Postgres => format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
                    _ => format!("DROP DATABASE IF EXISTS {name}"),
                };
                runtime.block_on(run_admin(backend, &admin_url, &statement));
            })
            .join();
            if dropped.is_err() {
                eprintln!("warning: could not drop test database {name}");
            }
        }
    }
}

async fn run_admin(backend: Backend, admin_url: &str, statement: &str) {
    let statement = sqlx::AssertSqlSafe(statement.to_owned());
    match backend {
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(admin_url)
                .await
                .expect("connect to SECKILL_TEST_POSTGRES_URL");
            conn.execute(statement).await.expect("admin statement");
            conn.close().await.ok();
        }
        Backend::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(admin_url)
                .await
                .expect("connect to SECKILL_TEST_MYSQL_URL");
            conn.execute(statement).await.expect("admin statement");
            conn.close().await.ok();
        }
        Backend::Sqlite => unreachable!("SQLite needs no admin statements"),
    }
}

fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "seckill_t{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `admin_url` with its database path replaced by `name`.
fn with_database(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (admin_url, String::new()),
    };
    let after_scheme = base.find("://").map(|at| at + 3).unwrap_or(0);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    format!("{base}/{name}{query}")
}

/// Runs `scenario` on `backend` (skipping it with a notice when the backend
/// is not configured) and prints how long it took.
pub async fn on_backend<F, Fut>(backend: Backend, test: &str, scenario: F)
where
    F: FnOnce(TestDatabase) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(database) = TestDatabase::create(backend, test).await else {
        return;
    };
    let started = Instant::now();
    scenario(database).await;
    eprintln!(
        "timing: {test} on {backend:?}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Declares one `#[tokio::test]` per backend for an async scenario
/// `fn(TestDatabase)`, in a module named after it.
#[macro_export]
macro_rules! on_every_backend {
    ($scenario:ident) => {
        mod $scenario {
            use $crate::support::{Backend, on_backend};

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                on_backend(Backend::Sqlite, stringify!($scenario), super::$scenario).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                on_backend(Backend::Postgres, stringify!($scenario), super::$scenario).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                on_backend(Backend::MySql, stringify!($scenario), super::$scenario).await;
            }
        }
    };
}

/// The config of instance `instance` over `redis_url` and `database_url`,
/// on any free port.
pub fn config(
    redis_url: &str,
    database_url: &str,
    strategy: StrategyKind,
    instance: u16,
    lab_schema: bool,
) -> ServiceConfig {
    ServiceConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        redis: redlatch::Deployment::new(redlatch::Servers::Single(redis_url.to_owned())),
        database_url: database_url.to_owned(),
        strategy,
        instance,
        lab_schema,
    }
}

/// Starts `count` instances together (ids 1..=count) on one Redis and one database.
pub async fn start_instances(
    redis_url: &str,
    database_url: &str,
    strategy: StrategyKind,
    count: u16,
    tuning: Tuning,
) -> Vec<Service> {
    let single = redlatch::Deployment::new(redlatch::Servers::Single(redis_url.to_owned()));
    start_instances_on(&single, database_url, strategy, count, tuning).await
}

/// A fresh Redis and `count` instances of `strategy` on it and `database`.
/// Keep the server: dropping it stops Redis.
pub async fn redis_and_instances(
    database: &TestDatabase,
    strategy: StrategyKind,
    count: u16,
    tuning: Tuning,
) -> (testkit::RedisServer, Vec<Service>) {
    let redis = testkit::RedisServer::start().expect("redis-server");
    let services = start_instances(&redis.url(), &database.url, strategy, count, tuning).await;
    (redis, services)
}

/// A fresh Redis and one instance of `strategy` on it and `database`.
/// Keep the server: dropping it stops Redis.
pub async fn redis_and_instance(
    database: &TestDatabase,
    strategy: StrategyKind,
    tuning: Tuning,
) -> (testkit::RedisServer, Service) {
    let (redis, mut services) = redis_and_instances(database, strategy, 1, tuning).await;
    (redis, services.remove(0))
}

/// Starts `count` instances together on `redis` (any deployment) and one database.
pub async fn start_instances_on(
    redis: &redlatch::Deployment,
    database_url: &str,
    strategy: StrategyKind,
    count: u16,
    tuning: Tuning,
) -> Vec<Service> {
    let starts = (1..=count).map(|instance| {
        let mut config = config("", database_url, strategy, instance, false);
        config.redis = redis.clone();
        seckill::serve::start_tuned(config, tuning.clone())
    });
    futures_util::future::join_all(starts)
        .await
        .into_iter()
        .map(|started| started.expect("instance starts"))
        .collect()
}

/// An HTTP client with a connection pool.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// A sale window that is open now: from a minute ago to an hour from now.
pub fn open_window() -> (DateTime<Utc>, DateTime<Utc>) {
    let now = Utc::now();
    (
        now - chrono::Duration::minutes(1),
        now + chrono::Duration::hours(1),
    )
}

/// Creates a voucher through `base` and returns its id.
pub async fn create_voucher(
    client: &reqwest::Client,
    base: &str,
    stock: i64,
    (begin_at, end_at): (DateTime<Utc>, DateTime<Utc>),
) -> i64 {
    let response = client
        .post(format!("{base}/vouchers"))
        .json(&json!({
            "title": "100 off",
            "stock": stock,
            "begin_at": begin_at.to_rfc3339(),
            "end_at": end_at.to_rfc3339(),
        }))
        .send()
        .await
        .expect("POST /vouchers");
    let status = response.status();
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(status, 201, "voucher created: {body}");
    body["id"].as_i64().expect("id")
}

/// One click and its answer (`status` is `None` when the connection failed).
#[derive(Clone, Debug)]
pub struct Click {
    /// The instance asked (its base URL).
    pub base: String,
    pub user_id: i64,
    pub status: Option<u16>,
    pub body: Value,
}

impl Click {
    /// The order id of an accepted order (201 written, 202 accepted for
    /// writing).
    pub fn order_id(&self) -> Option<i64> {
        matches!(self.status, Some(201 | 202)).then(|| self.body["order_id"].as_i64())?
    }
}

/// Places one order of `voucher_id` for `user_id` through `base`.
pub async fn click(client: &reqwest::Client, base: &str, voucher_id: i64, user_id: i64) -> Click {
    let sent = client
        .post(format!("{base}/vouchers/{voucher_id}/orders"))
        .header("X-User-Id", user_id.to_string())
        .send()
        .await;
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            Click {
                base: base.to_owned(),
                user_id,
                status: Some(status),
                body,
            }
        }
        Err(_) => Click {
            base: base.to_owned(),
            user_id,
            status: None,
            body: Value::Null,
        },
    }
}

/// `users` users × `clicks` concurrent clicks each, spread over `bases`
/// (click k of user u goes to base (u + k) mod n, so each user's clicks hit
/// every instance), at most `in_flight` at a time; a user's clicks are
/// adjacent in the queue, so they run together.
pub async fn click_storm(
    client: &reqwest::Client,
    bases: &[String],
    voucher_id: i64,
    users: i64,
    clicks: usize,
    in_flight: usize,
) -> Vec<Click> {
    let jobs = (1..=users).flat_map(|user| (0..clicks).map(move |k| (user, k)));
    futures_util::stream::iter(jobs)
        .map(|(user, k)| {
            let client = client.clone();
            let base = bases[(user as usize + k) % bases.len()].clone();
            tokio::spawn(async move { click(&client, &base, voucher_id, user).await })
        })
        .buffer_unordered(in_flight)
        .map(|joined| joined.expect("click task"))
        .collect()
        .await
}

/// Checks a sell-out in the database: exactly `stock` orders, one per user,
/// stock 0, and the order ids the clients were given are exactly those.
pub async fn assert_sold_out_exactly(
    database_url: &str,
    voucher_id: i64,
    stock: i64,
    clicks: &[Click],
) {
    let db = Db::connect(database_url).await.expect("database");
    let voucher = db
        .voucher(voucher_id)
        .await
        .expect("voucher")
        .expect("exists");
    let orders = db.orders(voucher_id).await.expect("orders");
    db.close().await;
    let users: HashSet<i64> = orders.iter().map(|order| order.user_id).collect();
    let order_ids: HashSet<i64> = orders.iter().map(|order| order.id).collect();
    let accepted: HashSet<i64> = clicks.iter().filter_map(Click::order_id).collect();
    assert_eq!(orders.len() as i64, stock, "orders in the database");
    assert_eq!(users.len() as i64, stock, "distinct buyers");
    assert_eq!(voucher.stock, 0, "stock left in the database");
    assert_eq!(
        accepted, order_ids,
        "201 order ids are the database's orders"
    );
    let accepted_users: HashSet<i64> = clicks
        .iter()
        .filter(|click| click.order_id().is_some())
        .map(|click| click.user_id)
        .collect();
    assert_eq!(accepted_users, users, "the users told 201 are the buyers");
}

/// Counts answers by status (`0` for a failed connection).
pub fn tally(clicks: &[Click]) -> std::collections::BTreeMap<u16, usize> {
    let mut tally = std::collections::BTreeMap::new();
    for click in clicks {
        *tally.entry(click.status.unwrap_or(0)).or_default() += 1;
    }
    tally
}

#[test]
fn database_name_replaces_the_path() {
    assert_eq!(
        with_database("postgres://postgres@127.0.0.1:5432/test", "x"),
        "postgres://postgres@127.0.0.1:5432/x"
    );
    assert_eq!(
        with_database("mysql://root@127.0.0.1:3306", "x"),
        "mysql://root@127.0.0.1:3306/x"
    );
    assert_eq!(
        with_database("postgres://u:p@h/db?sslmode=disable", "x"),
        "postgres://u:p@h/x?sslmode=disable"
    );
}

/// The stock of `voucher_id` in the database (the voucher must exist).
pub async fn stock_of(db: &Db, voucher_id: i64) -> i64 {
    db.voucher(voucher_id)
        .await
        .expect("voucher")
        .expect("exists")
        .stock
}

/// The `/metrics` page of the instance at `base`.
pub async fn metrics_page(http: &reqwest::Client, base: &str) -> String {
    http.get(format!("{base}/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("text")
}

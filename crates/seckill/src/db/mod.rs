//! The relational store: vouchers and orders, through one sqlx `AnyPool`.
//!
//! Every query is written once, with `?` placeholders, and runs unchanged on
//! SQLite, PostgreSQL and MySQL/MariaDB: [`render`] turns the `?` into `$1`,
//! `$2`... for PostgreSQL. Times are stored as BIGINT epoch milliseconds (the
//! one time type the three agree on) and converted to `chrono` here.
//!
//! # SQLite and concurrent writers
//!
//! Two instances may share one SQLite file. Each connection gets
//! `PRAGMA busy_timeout` (a writer that finds the file locked waits instead of
//! failing with "database is locked"), the file is switched to WAL once
//! (readers never block the writer), and write transactions start with
//! `BEGIN IMMEDIATE`: the write lock is taken at the start, where the busy
//! timeout applies, instead of at the first write of a transaction that has
//! already read, where SQLite fails at once (`SQLITE_BUSY_SNAPSHOT`). Within one
//! process, write transactions also queue on an async mutex, so the busy
//! handler's sleeps only arbitrate between processes.
//!
//! # Layout
//!
//! `Db` and `WriteTx` are the two handles; every statement they run is a
//! method of one of them, in the file of its concept: `sale` (vouchers,
//! orders, the strategies' stock writes), `lifecycle` (paying, cancelling,
//! expiring), `fencing` (fencing tokens), [`schema`] (creating the tables).
//! The records they read and write, [`OrderStatus`] included, live here too,
//! so that nothing in this module imports from the layers above it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor, SqlStr};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::BoxError;

mod backend;
mod error;
mod fencing;
mod lifecycle;
mod order_status;
mod records;
mod sale;
pub mod schema;

pub use backend::{Backend, render};
pub use error::DbError;
pub use order_status::{OrderStatus, UnknownStatus};
pub use records::{NewVoucher, Order, StoredOrder, Voucher};

/// How long a request waits for a pooled connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A pool of connections to the shop's database. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
    /// SQLite only: write transactions of this process queue here.
    write_gate: Option<Arc<Mutex<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Connects to `url` (`sqlite://path?mode=rwc`, `postgres://...`,
    /// `mysql://...`). Does not create or check the schema: the service does
    /// that at start ([`Db::prepare_schema`], see [`schema`]).
    ///
    /// # Errors
    /// An unsupported scheme, or the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Db, BoxError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url)?;
        if backend == Backend::Sqlite {
            enable_wal(url).await?;
        }
        let options = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 8,
                Backend::Postgres | Backend::MySql => 10,
            })
            .acquire_timeout(ACQUIRE_TIMEOUT);
        let options = if backend == Backend::Sqlite {
            options.after_connect(|conn, _meta| Box::pin(apply_sqlite_pragmas(conn)))
        } else {
            options
        };
        let pool = options.connect(url).await?;
        Ok(Db {
            pool,
            backend,
            write_gate: (backend == Backend::Sqlite).then(|| Arc::new(Mutex::new(()))),
        })
    }

    /// The database behind the URL.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the database answers a trivial query.
    ///
    /// # Errors
    /// It does not.
    pub async fn ping(&self) -> Result<(), DbError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }

    /// Closes every connection; waits for those in use to come back.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Starts a transaction that will write (see the module docs for SQLite).
    pub(crate) async fn begin_write(&self) -> Result<WriteTx, DbError> {
        let gate = self.write_gate().await;
        let tx = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres | Backend::MySql => self.pool.begin().await,
        }
        .map_err(DbError::classify)?;
        Ok(WriteTx {
            tx,
            backend: self.backend,
            _gate: gate,
        })
    }

    async fn write_gate(&self) -> Option<OwnedMutexGuard<()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.clone().lock_owned().await),
            None => None,
        }
    }

    fn sql(&self, sql: &'static str) -> SqlStr {
        render(self.backend, sql)
    }
}

/// One write transaction: the steps the strategies combine. Dropped without
/// [`commit`](WriteTx::commit), it rolls back.
pub(crate) struct WriteTx {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    backend: Backend,
    _gate: Option<OwnedMutexGuard<()>>,
}

impl WriteTx {
    /// Makes the writes durable.
    pub(crate) async fn commit(self) -> Result<(), DbError> {
        self.tx.commit().await.map_err(DbError::classify)
    }
}

/// Switches the SQLite file to WAL. The switch needs a moment of exclusive
/// access that the busy timeout does not cover, so a second instance starting
/// at the same time may be refused once: retry briefly. A no-op once in WAL.
async fn enable_wal(url: &str) -> Result<(), BoxError> {
    use sqlx::Connection as _;
    let mut last_error = None;
    for attempt in 0..50u64 {
        let outcome = async {
            let mut conn = sqlx::AnyConnection::connect(url).await?;
            apply_sqlite_pragmas(&mut conn).await?;
            conn.execute("PRAGMA journal_mode = WAL").await?;
            conn.close().await
        }
        .await;
        match outcome {
            Ok(()) => return Ok(()),
            Err(error) => {
                last_error = Some(error);
                tokio::time::sleep(Duration::from_millis(20 + attempt * 5)).await;
            }
        }
    }
    Err(format!(
        "cannot switch the SQLite database to WAL: {}",
        last_error.map(|e| e.to_string()).unwrap_or_default()
    )
    .into())
}

/// Per-connection SQLite settings: wait up to 30 s for the write lock instead
/// of failing, and fsync at checkpoints rather than at every commit (safe in
/// WAL mode: a crash loses no committed transaction, a power cut may lose the
/// last ones).
const SQLITE_SESSION_PRAGMAS: [&str; 2] =
    ["PRAGMA busy_timeout = 30000", "PRAGMA synchronous = NORMAL"];

async fn apply_sqlite_pragmas(conn: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
    for pragma in SQLITE_SESSION_PRAGMAS {
        conn.execute(pragma).await?;
    }
    Ok(())
}

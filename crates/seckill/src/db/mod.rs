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

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::error::ErrorKind;
use sqlx::{AnyPool, AssertSqlSafe, Executor, Row, SqlSafeStr, SqlStr};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::BoxError;

mod fencing;
mod lifecycle;

pub use lifecycle::StoredOrder;

/// How long a request waits for a pooled connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which database the URL points at. The SQL is the same; the DDL, the
/// placeholders and a few connection settings differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path?mode=rwc`
    Sqlite,
    /// `postgres://user@host/db`
    Postgres,
    /// `mysql://user@host/db` (MySQL 8 or MariaDB 10.5+)
    MySql,
}

impl Backend {
    /// The backend of a database URL, from its scheme.
    pub fn of_url(url: &str) -> Result<Backend, BoxError> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "sqlite" => Ok(Backend::Sqlite),
            "postgres" | "postgresql" => Ok(Backend::Postgres),
            "mysql" | "mariadb" => Ok(Backend::MySql),
            _ => Err(format!(
                "unsupported database URL scheme {scheme:?}: use sqlite://, postgres:// or mysql://"
            )
            .into()),
        }
    }
}

/// A voucher on sale: `stock` units between `begin_at` and `end_at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voucher {
    /// Database id.
    pub id: i64,
    /// Shown to buyers.
    pub title: String,
    /// Units left, as the database sees them (lags behind Redis with the
    /// `reserve` strategy until the consumer has persisted accepted orders).
    pub stock: i64,
    /// Orders are accepted from this instant...
    pub begin_at: DateTime<Utc>,
    /// ...until this one (exclusive).
    pub end_at: DateTime<Utc>,
}

/// One order: one unit of one voucher for one user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// From the Redis id worker: unique and time-ordered across instances.
    pub id: i64,
    /// The buyer.
    pub user_id: i64,
    /// The voucher bought.
    pub voucher_id: i64,
    /// When the order was accepted.
    pub created_at: DateTime<Utc>,
}

/// The fields of a voucher about to be created.
#[derive(Clone, Debug)]
pub struct NewVoucher {
    /// Shown to buyers (1..=200 characters).
    pub title: String,
    /// Units on sale (>= 0).
    pub stock: i64,
    /// Start of the sale window.
    pub begin_at: DateTime<Utc>,
    /// End of the sale window (after `begin_at`).
    pub end_at: DateTime<Utc>,
}

/// A database failure, sorted by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A UNIQUE or PRIMARY KEY constraint refused the write.
    #[error("unique constraint violated: {0}")]
    Unique(String),
    /// A CHECK constraint refused the write (`stock >= 0`).
    #[error("check constraint violated: {0}")]
    Check(String),
    /// No connection within the pool's acquire timeout, a lock timeout, or a
    /// deadlock the database broke by aborting us: retrying later may work.
    #[error("database busy: {0}")]
    Busy(String),
    /// Anything else.
    #[error("database error: {0}")]
    Other(#[from] sqlx::Error),
}

impl DbError {
    fn classify(error: sqlx::Error) -> DbError {
        if let sqlx::Error::PoolTimedOut = error {
            return DbError::Busy("no database connection available".to_owned());
        }
        if let Some(database) = error.as_database_error() {
            let message = database.message().to_owned();
            match database.kind() {
                ErrorKind::UniqueViolation => return DbError::Unique(message),
                ErrorKind::CheckViolation => return DbError::Check(message),
                _ => {}
            }
            let code = database.code().map(|code| code.into_owned());
            let busy = matches!(
                code.as_deref(),
                // PostgreSQL: deadlock, serialization failure, lock timeout.
                Some("40P01" | "40001" | "55P03")
                // MySQL/MariaDB: deadlock, lock wait timeout (SQLSTATE).
                | Some("40000")
                // SQLite: SQLITE_BUSY and SQLITE_LOCKED with extended codes.
                | Some("5" | "6" | "261" | "517" | "262")
            ) || message.contains("database is locked")
                || message.contains("Deadlock found")
                || message.contains("Lock wait timeout");
            if busy {
                return DbError::Busy(message);
            }
        }
        DbError::Other(error)
    }
}

/// Renders `sql`, written with `?` placeholders, for `backend`: `$1`, `$2`...
/// on PostgreSQL, unchanged elsewhere. The statements of this crate contain no
/// `?` inside string literals, so a plain scan is enough.
pub fn render(backend: Backend, sql: &'static str) -> SqlStr {
    match backend {
        Backend::Postgres => {
            let mut rendered = String::with_capacity(sql.len() + 8);
            let mut next = 1;
            for ch in sql.chars() {
                if ch == '?' {
                    rendered.push('$');
                    rendered.push_str(&next.to_string());
                    next += 1;
                } else {
                    rendered.push(ch);
                }
            }
            AssertSqlSafe(rendered).into_sql_str()
        }
        Backend::Sqlite | Backend::MySql => sql.into_sql_str(),
    }
}

/// The statements, one text for every backend.
mod sql {
    pub const INSERT_VOUCHER: &str =
        "INSERT INTO voucher (title, stock, begin_at, end_at) VALUES (?, ?, ?, ?)";
    /// PostgreSQL has no `last_insert_id`, and sqlx's SQLite driver does not
    /// pass it through `Any`: their rendering appends this (SQLite >= 3.35).
    pub const RETURNING_ID: &str = " RETURNING id";
    pub const SELECT_VOUCHER: &str =
        "SELECT id, title, stock, begin_at, end_at FROM voucher WHERE id = ?";
    /// The newest vouchers, newest first (the caller reverses them);
    /// `LIMIT ?` binds on all three backends.
    pub const LIST_VOUCHERS: &str =
        "SELECT id, title, stock, begin_at, end_at FROM voucher ORDER BY id DESC LIMIT ?";
    pub const SELECT_STOCK: &str = "SELECT stock FROM voucher WHERE id = ?";
    pub const COUNT_USER_ORDERS: &str =
        "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = ? AND user_id = ?";
    pub const ORDER_OWNER: &str = "SELECT user_id, voucher_id FROM voucher_order WHERE id = ?";
    pub const DECREMENT: &str = "UPDATE voucher SET stock = stock - 1 WHERE id = ?";
    pub const DECREMENT_IF_LEFT: &str =
        "UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock > 0";
    pub const INSERT_ORDER: &str =
        "INSERT INTO voucher_order (id, user_id, voucher_id, created_at) VALUES (?, ?, ?, ?)";
    pub const LIST_ORDERS: &str = "SELECT id, user_id, voucher_id, created_at FROM voucher_order \
         WHERE voucher_id = ? ORDER BY id";
    pub const LIST_ORDERS_AFTER: &str = "SELECT id, user_id, voucher_id, created_at \
         FROM voucher_order WHERE voucher_id = ? AND id > ? ORDER BY id LIMIT ?";
    pub const COUNT_ORDERS: &str = "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = ?";
    pub const LIST_BUYERS: &str = "SELECT user_id FROM voucher_order WHERE voucher_id = ?";
    // The demo's optimistic-lock strategies (seed 004 §2).
    pub const SELECT_STOCK_VERSION: &str = "SELECT stock, version FROM voucher WHERE id = ?";
    pub const DECREMENT_IF_STOCK_IS: &str =
        "UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock = ?";
    pub const DECREMENT_IF_VERSION_IS: &str =
        "UPDATE voucher SET stock = stock - 1, version = version + 1 WHERE id = ? AND version = ?";
}

/// A pool of connections to the shop's database. Cheap to clone.
#[derive(Clone)]
pub struct Db {
    pub(crate) pool: AnyPool,
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
    /// that at start ([`Db::prepare_schema`], see [`schema`](crate::schema)).
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

    /// The voucher `id`, if it exists.
    ///
    /// # Errors
    /// Database failures.
    pub async fn voucher(&self, id: i64) -> Result<Option<Voucher>, BoxError> {
        Ok(self.find_voucher(id).await?)
    }

    /// Every order of voucher `voucher_id`, by order id.
    ///
    /// # Errors
    /// Database failures.
    pub async fn orders(&self, voucher_id: i64) -> Result<Vec<Order>, BoxError> {
        Ok(self.list_orders(voucher_id).await?)
    }

    pub(crate) async fn find_voucher(&self, id: i64) -> Result<Option<Voucher>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_VOUCHER))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| voucher_of_row(&row)).transpose()
    }

    /// The newest `limit` vouchers, ordered by id (newest last), stock as
    /// the database has it.
    ///
    /// # Errors
    /// Database failures.
    pub(crate) async fn vouchers(&self, limit: u32) -> Result<Vec<Voucher>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_VOUCHERS))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        let mut vouchers = rows
            .iter()
            .map(voucher_of_row)
            .collect::<Result<Vec<_>, _>>()?;
        vouchers.reverse();
        Ok(vouchers)
    }

    pub(crate) async fn list_orders(&self, voucher_id: i64) -> Result<Vec<Order>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_ORDERS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter().map(order_of_row).collect()
    }

    /// Up to `limit` orders of `voucher_id` with ids above `after`, by id.
    pub(crate) async fn list_orders_after(
        &self,
        voucher_id: i64,
        after: i64,
        limit: u32,
    ) -> Result<Vec<Order>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_ORDERS_AFTER))
            .bind(voucher_id)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter().map(order_of_row).collect()
    }

    /// How many orders `voucher_id` has.
    pub(crate) async fn count_orders(&self, voucher_id: i64) -> Result<i64, DbError> {
        Ok(sqlx::query(self.sql(sql::COUNT_ORDERS))
            .bind(voucher_id)
            .fetch_one(&self.pool)
            .await
            .map_err(DbError::classify)?
            .try_get(0)?)
    }

    /// Stores a new voucher and returns its id.
    pub(crate) async fn insert_voucher(&self, voucher: &NewVoucher) -> Result<i64, DbError> {
        let query = |sql: SqlStr| {
            sqlx::query(sql)
                .bind(voucher.title.clone())
                .bind(voucher.stock)
                .bind(voucher.begin_at.timestamp_millis())
                .bind(voucher.end_at.timestamp_millis())
        };
        match self.backend {
            Backend::Postgres | Backend::Sqlite => {
                let _gate = self.write_gate().await;
                let sql = format!(
                    "{}{}",
                    self.sql(sql::INSERT_VOUCHER).as_str(),
                    sql::RETURNING_ID
                );
                let row = query(AssertSqlSafe(sql).into_sql_str())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(DbError::classify)?;
                row.try_get::<i64, _>(0).map_err(DbError::from)
            }
            Backend::MySql => {
                let done = query(self.sql(sql::INSERT_VOUCHER))
                    .execute(&self.pool)
                    .await
                    .map_err(DbError::classify)?;
                done.last_insert_id().ok_or_else(|| {
                    DbError::Other(sqlx::Error::Protocol(
                        "the database returned no id for the new voucher".to_owned(),
                    ))
                })
            }
        }
    }

    /// The voucher's stock, read outside any transaction.
    pub(crate) async fn stock(&self, voucher_id: i64) -> Result<Option<i64>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_STOCK))
            .bind(voucher_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| row.try_get::<i64, _>(0).map_err(DbError::from))
            .transpose()
    }

    /// Whether `user_id` already has an order of `voucher_id`, read outside
    /// any transaction.
    pub(crate) async fn has_order(&self, voucher_id: i64, user_id: i64) -> Result<bool, DbError> {
        let count: i64 = sqlx::query(self.sql(sql::COUNT_USER_ORDERS))
            .bind(voucher_id)
            .bind(user_id)
            .fetch_one(&self.pool)
            .await
            .map_err(DbError::classify)?
            .try_get(0)?;
        Ok(count > 0)
    }

    /// The user and voucher of the order with this id, if there is one,
    /// read outside any transaction.
    pub(crate) async fn order_owner(&self, order_id: i64) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(self.sql(sql::ORDER_OWNER))
            .bind(order_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
    }

    /// The users who have an order of `voucher_id`.
    pub(crate) async fn buyers(&self, voucher_id: i64) -> Result<Vec<i64>, DbError> {
        let rows = sqlx::query(self.sql(sql::LIST_BUYERS))
            .bind(voucher_id)
            .fetch_all(&self.pool)
            .await
            .map_err(DbError::classify)?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>(0).map_err(DbError::from))
            .collect()
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

    pub(crate) fn sql(&self, sql: &'static str) -> SqlStr {
        render(self.backend, sql)
    }

    /// The voucher's stock and version, read together outside any
    /// transaction (the `optimistic-version` strategy's snapshot).
    pub(crate) async fn stock_and_version(
        &self,
        voucher_id: i64,
    ) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(self.sql(sql::SELECT_STOCK_VERSION))
            .bind(voucher_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
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
    /// The user and voucher of the order with this id, if there is one (the
    /// reserve consumer's idempotency check, which must tell the same order
    /// from another one that drew the same id).
    pub(crate) async fn order_owner(
        &mut self,
        order_id: i64,
    ) -> Result<Option<(i64, i64)>, DbError> {
        let row = sqlx::query(render(self.backend, sql::ORDER_OWNER))
            .bind(order_id)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        row.map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?)))
            .transpose()
    }

    /// `stock = stock - 1`, whatever the stock: the naive strategy's write.
    /// Returns whether the voucher row exists.
    pub(crate) async fn decrement(&mut self, voucher_id: i64) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT, voucher_id, None).await
    }

    /// `stock = stock - 1 WHERE stock > 0`: returns false when none was left.
    pub(crate) async fn decrement_if_left(&mut self, voucher_id: i64) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_LEFT, voucher_id, None)
            .await
    }

    /// Inserts the order.
    pub(crate) async fn insert_order(&mut self, order: &Order) -> Result<(), DbError> {
        sqlx::query(render(self.backend, sql::INSERT_ORDER))
            .bind(order.id)
            .bind(order.user_id)
            .bind(order.voucher_id)
            .bind(order.created_at.timestamp_millis())
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(())
    }

    /// Runs one `UPDATE voucher ... WHERE id = ? [AND ... = ?]` of `sql`,
    /// with the value `seen` when its condition compares one; whether a row
    /// changed.
    async fn change_voucher(
        &mut self,
        sql: &'static str,
        voucher_id: i64,
        seen: Option<i64>,
    ) -> Result<bool, DbError> {
        let mut query = sqlx::query(render(self.backend, sql)).bind(voucher_id);
        if let Some(seen) = seen {
            query = query.bind(seen);
        }
        let done = query
            .execute(&mut *self.tx)
            .await
            .map_err(DbError::classify)?;
        Ok(done.rows_affected() > 0)
    }

    /// Makes the writes durable.
    pub(crate) async fn commit(self) -> Result<(), DbError> {
        self.tx.commit().await.map_err(DbError::classify)
    }

    /// `stock = stock - 1 WHERE stock = seen`: compare-and-set on the stock
    /// read earlier. Returns false when the stock is no longer `seen`.
    pub(crate) async fn decrement_if_stock_is(
        &mut self,
        voucher_id: i64,
        seen: i64,
    ) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_STOCK_IS, voucher_id, Some(seen))
            .await
    }

    /// `stock = stock - 1, version = version + 1 WHERE version = seen`: the
    /// version-column optimistic lock. Returns false when another write
    /// bumped the version since it was read.
    pub(crate) async fn decrement_if_version_is(
        &mut self,
        voucher_id: i64,
        seen: i64,
    ) -> Result<bool, DbError> {
        self.change_voucher(sql::DECREMENT_IF_VERSION_IS, voucher_id, Some(seen))
            .await
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

fn voucher_of_row(row: &AnyRow) -> Result<Voucher, DbError> {
    Ok(Voucher {
        id: row.try_get(0)?,
        title: row.try_get(1)?,
        stock: row.try_get(2)?,
        begin_at: time_of_millis(row.try_get(3)?)?,
        end_at: time_of_millis(row.try_get(4)?)?,
    })
}

fn order_of_row(row: &AnyRow) -> Result<Order, DbError> {
    Ok(Order {
        id: row.try_get(0)?,
        user_id: row.try_get(1)?,
        voucher_id: row.try_get(2)?,
        created_at: time_of_millis(row.try_get(3)?)?,
    })
}

fn time_of_millis(millis: i64) -> Result<DateTime<Utc>, DbError> {
    Utc.timestamp_millis_opt(millis).single().ok_or_else(|| {
        DbError::Other(sqlx::Error::Protocol(format!(
            "stored time {millis} ms is out of range"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered_in_order() {
        let rendered = render(Backend::Postgres, sql::COUNT_USER_ORDERS);
        assert_eq!(
            rendered.as_str(),
            "SELECT COUNT(*) FROM voucher_order WHERE voucher_id = $1 AND user_id = $2"
        );
        let rendered = render(Backend::Postgres, sql::INSERT_ORDER);
        assert!(rendered.as_str().ends_with("VALUES ($1, $2, $3, $4)"));
    }

    #[test]
    fn other_backends_keep_question_marks() {
        assert_eq!(
            render(Backend::MySql, sql::DECREMENT).as_str(),
            sql::DECREMENT
        );
        assert_eq!(
            render(Backend::Sqlite, sql::DECREMENT).as_str(),
            sql::DECREMENT
        );
    }

    #[test]
    fn backend_follows_the_url_scheme() {
        assert_eq!(
            Backend::of_url("sqlite://x.db?mode=rwc").ok(),
            Some(Backend::Sqlite)
        );
        assert_eq!(
            Backend::of_url("postgres://u@h/d").ok(),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::of_url("postgresql://u@h/d").ok(),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::of_url("mysql://u@h/d").ok(), Some(Backend::MySql));
        assert!(Backend::of_url("oracle://u@h/d").is_err());
    }
}

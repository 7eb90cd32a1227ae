//! Creating the tables at start, and refusing a database of the other kind.
//!
//! Two kinds of schema exist, never both in one database:
//!
//! - **normal**: `UNIQUE (voucher_id, user_id)` on orders and
//!   `CHECK (stock >= 0)` on vouchers. Whatever a strategy gets wrong, the
//!   database refuses the oversold unit or the second order of a user, and the
//!   service answers 410 or 409.
//! - **lab** (`--lab`): neither constraint, so the teaching strategies' races
//!   show up in the data (stock below zero, two orders of one user).
//!
//! The kind is recorded in a one-row table `seckill_schema`; a service asked
//! for the other kind stops with an error naming both. Creation runs under a
//! database-wide lock (PostgreSQL advisory lock, MySQL `GET_LOCK`, SQLite
//! `BEGIN IMMEDIATE`), so instances starting together do not trip over each
//! other's `CREATE TABLE IF NOT EXISTS`.

use sqlx::{AnyConnection, Executor, Row};

use super::{Backend, Db, render};
use crate::BoxError;

/// Which constraints the tables carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// UNIQUE per user and voucher, CHECK stock >= 0.
    Normal,
    /// No UNIQUE, no CHECK: lets the teaching strategies corrupt the data.
    Lab,
}

impl SchemaKind {
    /// The name recorded in `seckill_schema`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKind::Normal => "normal",
            SchemaKind::Lab => "lab",
        }
    }
}

/// The key of the PostgreSQL advisory lock taken while the schema is
/// created: any fixed number other programs on the database do not use.
const PG_SCHEMA_LOCK_KEY: i64 = 7_365_636_170;
/// How long MySQL waits for the schema lock, in seconds.
const MYSQL_SCHEMA_LOCK_WAIT_SECONDS: i64 = 60;

impl Db {
    /// Creates the tables of `kind` if they do not exist; fails when the
    /// database already holds the other kind, or tables seckill did not record.
    /// Idempotent, and safe when several instances run it at once.
    ///
    /// # Errors
    /// A schema of the other kind, or a database failure.
    pub async fn prepare_schema(&self, kind: SchemaKind) -> Result<(), BoxError> {
        let backend = self.backend();
        match backend {
            Backend::Sqlite => {
                // DDL is transactional in SQLite; IMMEDIATE takes the write lock now.
                let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
                create_tables(&mut tx, backend, kind).await?;
                tx.commit().await?;
                Ok(())
            }
            Backend::Postgres => {
                let mut conn = self.pool.acquire().await?;
                sqlx::query(render(
                    backend,
                    "SELECT 1 FROM (SELECT pg_advisory_lock(?)) AS locked",
                ))
                .bind(PG_SCHEMA_LOCK_KEY)
                .execute(&mut *conn)
                .await?;
                let outcome = create_tables(&mut conn, backend, kind).await;
                sqlx::query(render(
                    backend,
                    "SELECT 1 FROM (SELECT pg_advisory_unlock(?)) AS unlocked",
                ))
                .bind(PG_SCHEMA_LOCK_KEY)
                .execute(&mut *conn)
                .await?;
                outcome
            }
            Backend::MySql => {
                let mut conn = self.pool.acquire().await?;
                let granted: Option<i64> = sqlx::query("SELECT GET_LOCK('seckill_schema', ?)")
                    .bind(MYSQL_SCHEMA_LOCK_WAIT_SECONDS)
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get(0)?;
                if granted != Some(1) {
                    return Err("timed out waiting for the schema lock (GET_LOCK)".into());
                }
                let outcome = create_tables(&mut conn, backend, kind).await;
                sqlx::query("SELECT RELEASE_LOCK('seckill_schema')")
                    .execute(&mut *conn)
                    .await?;
                outcome
            }
        }
    }
}

async fn create_tables(
    conn: &mut AnyConnection,
    backend: Backend,
    kind: SchemaKind,
) -> Result<(), BoxError> {
    conn.execute("CREATE TABLE IF NOT EXISTS seckill_schema (kind VARCHAR(20) NOT NULL)")
        .await?;
    let recorded: Option<String> = sqlx::query("SELECT kind FROM seckill_schema")
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    match recorded {
        Some(found) if found == kind.as_str() => check_current(conn).await,
        Some(found) => Err(format!(
            "the database holds the {found} schema, but the {wanted} schema was asked for \
             ({hint}); use another database",
            wanted = kind.as_str(),
            hint = match kind {
                SchemaKind::Lab => "--lab was given",
                SchemaKind::Normal => "--lab was not given",
            }
        )
        .into()),
        None => {
            // Tables without a record were not made by seckill: their
            // constraints are unknown, so refuse rather than guess.
            if conn.execute("SELECT COUNT(*) FROM voucher").await.is_ok() {
                return Err(
                    "the database has a voucher table but no seckill_schema record: \
                     it was not created by seckill; use another database"
                        .into(),
                );
            }
            for statement in table_ddl(backend, kind) {
                conn.execute(sqlx::AssertSqlSafe(statement)).await?;
            }
            sqlx::query(render(
                backend,
                "INSERT INTO seckill_schema (kind) VALUES (?)",
            ))
            .bind(kind.as_str())
            .execute(&mut *conn)
            .await?;
            Ok(())
        }
    }
}

/// The fencing rows' expiry column; rows of a seckill before it never go.
const FENCE_EXPIRES_AT: &str = "expires_at BIGINT NOT NULL DEFAULT 9223372036854775807";

/// Refuses tables made by an older seckill, before orders had a status:
/// their rows cannot be paid, cancelled or expired. Adds the fencing rows'
/// expiry where it is missing (its rows then stay, as they did).
async fn check_current(conn: &mut AnyConnection) -> Result<(), BoxError> {
    if conn
        .execute("SELECT status, status_at, stock_back FROM voucher_order WHERE 1 = 0")
        .await
        .is_err()
        || conn
            .execute("SELECT token FROM seckill_fence WHERE 1 = 0")
            .await
            .is_err()
    {
        return Err(
            "the database was created by an older seckill (orders without a status, \
                    no fencing table); use another database"
                .into(),
        );
    }
    if conn
        .execute("SELECT expires_at FROM seckill_fence WHERE 1 = 0")
        .await
        .is_err()
    {
        conn.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE seckill_fence ADD COLUMN {FENCE_EXPIRES_AT}"
        )))
        .await?;
        conn.execute("CREATE INDEX seckill_fence_by_expiry ON seckill_fence (expires_at)")
            .await?;
    }
    Ok(())
}

/// The CREATE statements: column types are portable (BIGINT, VARCHAR), only
/// the auto-increment id and index syntax differ.
fn table_ddl(backend: Backend, kind: SchemaKind) -> Vec<String> {
    let voucher_id_column = match backend {
        Backend::Sqlite => "id INTEGER PRIMARY KEY AUTOINCREMENT",
        Backend::Postgres => "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        Backend::MySql => "id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
    };
    let table_options = match backend {
        Backend::MySql => " ENGINE=InnoDB",
        Backend::Sqlite | Backend::Postgres => "",
    };
    let stock_check = match kind {
        SchemaKind::Normal => ", CONSTRAINT voucher_stock_not_negative CHECK (stock >= 0)",
        SchemaKind::Lab => "",
    };
    // (voucher_id, user_id) rather than (user_id, voucher_id): the same
    // constraint, and its index also serves "orders of a voucher".
    let order_key = match (kind, backend) {
        (SchemaKind::Normal, _) => {
            ", CONSTRAINT voucher_order_one_per_user UNIQUE (voucher_id, user_id)"
        }
        (SchemaKind::Lab, Backend::MySql) => {
            ", INDEX voucher_order_by_voucher_user (voucher_id, user_id)"
        }
        (SchemaKind::Lab, Backend::Sqlite | Backend::Postgres) => "",
    };
    let mut statements = vec![
        format!(
            "CREATE TABLE IF NOT EXISTS voucher ({voucher_id_column}, \
             title VARCHAR(200) NOT NULL, stock BIGINT NOT NULL, \
             begin_at BIGINT NOT NULL, end_at BIGINT NOT NULL, \
             version BIGINT NOT NULL DEFAULT 0{stock_check}){table_options}"
        ),
        // status: pending, paid, cancelled, expired (lifecycle.rs).
        // stock_back: 1 once a cancelled or expired order's unit is back in
        // the Redis stock too (reserve), so a crash between the two is
        // finished later and never done twice.
        format!(
            "CREATE TABLE IF NOT EXISTS voucher_order (id BIGINT NOT NULL PRIMARY KEY, \
             user_id BIGINT NOT NULL, voucher_id BIGINT NOT NULL, \
             created_at BIGINT NOT NULL, status VARCHAR(16) NOT NULL DEFAULT 'pending', \
             status_at BIGINT NOT NULL DEFAULT 0, stock_back SMALLINT NOT NULL DEFAULT 0\
             {order_key}){table_options}"
        ),
        // The newest fencing token seen per locked resource, and when the
        // row may go (fencing.rs).
        format!(
            "CREATE TABLE IF NOT EXISTS seckill_fence (resource VARCHAR(200) NOT NULL PRIMARY KEY, \
             token BIGINT NOT NULL, {FENCE_EXPIRES_AT}){table_options}"
        ),
        "CREATE INDEX seckill_fence_by_expiry ON seckill_fence (expires_at)".to_owned(),
    ];
    statements.push(match backend {
        Backend::MySql => {
            "CREATE INDEX voucher_order_by_status ON voucher_order (status, created_at)".to_owned()
        }
        Backend::Sqlite | Backend::Postgres => {
            "CREATE INDEX IF NOT EXISTS voucher_order_by_status \
             ON voucher_order (status, created_at)"
                .to_owned()
        }
    });
    if kind == SchemaKind::Lab && backend != Backend::MySql {
        statements.push(
            "CREATE INDEX IF NOT EXISTS voucher_order_by_voucher_user \
             ON voucher_order (voucher_id, user_id)"
                .to_owned(),
        );
    }
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_schema_has_no_constraints() {
        for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
            let ddl = table_ddl(backend, SchemaKind::Lab).join("\n");
            assert!(!ddl.contains("UNIQUE"), "{backend:?}: {ddl}");
            assert!(!ddl.contains("CHECK"), "{backend:?}: {ddl}");
            let ddl = table_ddl(backend, SchemaKind::Normal).join("\n");
            assert!(ddl.contains("UNIQUE (voucher_id, user_id)"), "{backend:?}");
            assert!(ddl.contains("CHECK (stock >= 0)"), "{backend:?}");
        }
    }
}

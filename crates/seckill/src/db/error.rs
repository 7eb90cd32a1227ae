//! A database failure, sorted by what the caller can do about it.

use sqlx::error::ErrorKind;

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
    pub(super) fn classify(error: sqlx::Error) -> DbError {
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

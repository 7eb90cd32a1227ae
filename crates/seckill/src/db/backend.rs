//! Which database a URL names, and its spelling of placeholders.

use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

use crate::BoxError;

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

#[cfg(test)]
mod tests {
    use super::*;

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

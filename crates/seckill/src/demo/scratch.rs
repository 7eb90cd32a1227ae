//! A fresh, empty database for each strategy of the demo.
//!
//! Three places to put them:
//!
//! - nothing given: SQLite files in a temporary directory, removed at the end;
//! - `sqlite:PREFIX`: the files `PREFIX-<strategy>.db`, replaced when they
//!   exist and kept afterwards (to look at them);
//! - `postgres://…` or `mysql://…`: a scratch server; the demo creates one
//!   database per strategy there (`seckill_demo_<pid>_<strategy>`) through
//!   the URL's own database, and drops them at the end.

use std::path::{Path, PathBuf};

use reqwest::Url;
use sqlx::{AssertSqlSafe, Connection as _};

use crate::BoxError;

/// Where the demo's databases are made.
pub(crate) enum Scratch {
    Temporary(tempfile::TempDir),
    SqlitePrefix(PathBuf),
    Server(Server),
}

/// A PostgreSQL or MySQL server the demo creates databases on.
pub(crate) struct Server {
    /// The URL given, through which databases are created and dropped.
    admin: Url,
    created: Vec<String>,
}

impl Scratch {
    /// Interprets `--database`.
    pub(crate) fn new(database: Option<&str>) -> Result<Self, BoxError> {
        let Some(url) = database else {
            let dir = tempfile::Builder::new().prefix("seckill-demo-").tempdir()?;
            return Ok(Self::Temporary(dir));
        };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() || path.starts_with(":memory:") {
                return Err("--database sqlite:PREFIX needs a file path prefix, e.g. sqlite:///tmp/seckill-demo".into());
            }
            return Ok(Self::SqlitePrefix(PathBuf::from(path)));
        }
        let admin =
            Url::parse(url).map_err(|error| format!("--database {url:?} is not a URL: {error}"))?;
        match admin.scheme() {
            "postgres" | "postgresql" | "mysql" | "mariadb" => Ok(Self::Server(Server {
                admin,
                created: Vec::new(),
            })),
            other => Err(format!(
                "--database: unsupported scheme {other:?} (sqlite:, postgres://, mysql://)"
            )
            .into()),
        }
    }

    /// An empty database for `strategy`; returns its URL.
    pub(crate) async fn fresh(&mut self, strategy: &str) -> Result<String, BoxError> {
        match self {
            Self::Temporary(dir) => sqlite_file(&dir.path().join(format!("{strategy}.db"))),
            Self::SqlitePrefix(prefix) => {
                let mut name = prefix.as_os_str().to_owned();
                name.push(format!("-{strategy}.db"));
                sqlite_file(Path::new(&name))
            }
            Self::Server(server) => server.fresh(strategy).await,
        }
    }

    /// Drops what the demo created on a server (best effort; the temporary
    /// directory removes itself).
    pub(crate) async fn cleanup(self) {
        if let Self::Server(server) = self {
            for name in &server.created {
                if let Err(error) = server
                    .execute(&format!("DROP DATABASE IF EXISTS {name}"))
                    .await
                {
                    tracing::warn!(%error, database = %name, "could not drop the demo's database");
                }
            }
        }
    }
}

/// Removes a previous run's file (and its WAL companions) and returns the
/// URL that creates it anew.
fn sqlite_file(path: &Path) -> Result<String, BoxError> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(
                    format!("cannot remove {}: {error}", Path::new(&name).display()).into(),
                );
            }
        }
    }
    let text = path
        .to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
    Ok(format!("sqlite://{text}?mode=rwc"))
}

impl Server {
    async fn fresh(&mut self, strategy: &str) -> Result<String, BoxError> {
        // Only [a-z0-9_]: safe to put into the statement as it is.
        let name = format!(
            "seckill_demo_{}_{}",
            std::process::id(),
            strategy.replace('-', "_")
        );
        self.execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .await?;
        self.execute(&format!("CREATE DATABASE {name}")).await?;
        self.created.push(name.clone());
        let mut url = self.admin.clone();
        url.set_path(&format!("/{name}"));
        Ok(url.to_string())
    }

    async fn execute(&self, statement: &str) -> Result<(), BoxError> {
        let url = self.admin.as_str();
        let failed = |error: sqlx::Error| {
            format!(
                "{statement} on {}: {error}",
                self.admin.host_str().unwrap_or("?")
            )
        };
        if matches!(self.admin.scheme(), "postgres" | "postgresql") {
            let mut conn = sqlx::postgres::PgConnection::connect(url)
                .await
                .map_err(failed)?;
            sqlx::raw_sql(AssertSqlSafe(statement.to_owned()))
                .execute(&mut conn)
                .await
                .map_err(failed)?;
            conn.close().await.ok();
        } else {
            let mut conn = sqlx::mysql::MySqlConnection::connect(url)
                .await
                .map_err(failed)?;
            sqlx::raw_sql(AssertSqlSafe(statement.to_owned()))
                .execute(&mut conn)
                .await
                .map_err(failed)?;
            conn.close().await.ok();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_prefixes_become_one_file_per_strategy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prefix = dir.path().join("shop");
        let mut scratch =
            Scratch::new(Some(&format!("sqlite://{}", prefix.display()))).expect("sqlite prefix");
        let stale = dir.path().join("shop-naive.db");
        std::fs::write(&stale, b"old").expect("write");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let url = runtime.block_on(scratch.fresh("naive")).expect("fresh");
        assert_eq!(url, format!("sqlite://{}?mode=rwc", stale.display()));
        assert!(!stale.exists(), "the previous run's file is removed");
    }

    #[test]
    fn unusable_database_urls_are_refused() {
        assert!(Scratch::new(Some("sqlite:")).is_err());
        assert!(Scratch::new(Some("sqlite::memory:")).is_err());
        assert!(Scratch::new(Some("redis://127.0.0.1/")).is_err());
        assert!(Scratch::new(Some("not a url")).is_err());
        assert!(matches!(
            Scratch::new(Some("postgres://root@127.0.0.1/postgres")),
            Ok(Scratch::Server(_))
        ));
    }
}

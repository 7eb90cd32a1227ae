//! The demo's Redis: a private throwaway `redis-server`, or the one given
//! with `--redis`, emptied before each strategy so that no lock, stock
//! counter, buyer set or order id of one run leaks into the next.

use crate::BoxError;

/// A Redis database the demo may empty at will.
pub(crate) struct Keyspace {
    url: String,
    /// Kept alive for the demo's duration; dropping it stops the server.
    _private: Option<testkit::RedisServer>,
}

impl Keyspace {
    /// The server at `url`, or a private one started from `redis-server` on
    /// the PATH on a free port.
    pub(crate) async fn open(url: Option<&str>) -> Result<Self, BoxError> {
        if let Some(url) = url {
            return Ok(Self {
                url: url.to_owned(),
                _private: None,
            });
        }
        // Starting waits for the child to accept connections: off the runtime.
        let server = tokio::task::spawn_blocking(testkit::RedisServer::start)
            .await?
            .map_err(|error| format!("cannot start a private redis-server: {error}"))?;
        Ok(Self {
            url: server.url(),
            _private: Some(server),
        })
    }

    /// The URL the services connect to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// `FLUSHDB` on the URL's database.
    pub(crate) async fn flush(&self) -> Result<(), BoxError> {
        let client =
            redis::Client::open(self.url.as_str()).map_err(|error| format!("--redis: {error}"))?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|error| format!("cannot reach Redis: {error}"))?;
        redis::cmd("FLUSHDB").query_async::<()>(&mut conn).await?;
        Ok(())
    }
}

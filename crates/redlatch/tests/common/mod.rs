//! Helpers shared by the integration tests: a fresh redis-server per test
//! (from the testkit) and clients with short timeouts.
#![allow(dead_code)]

use std::time::Duration;

use redlatch::Client;
use testkit::RedisServer;

/// Starts a throwaway redis-server on a free port.
pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (is it installed? see README)")
}

/// A client with timeouts short enough for fault tests.
pub async fn client(server: &RedisServer) -> Client {
    client_with_lease(server, redlatch::DEFAULT_LEASE).await
}

/// A client whose watchdog lease is `lease`.
pub async fn client_with_lease(server: &RedisServer, lease: Duration) -> Client {
    Client::builder(&server.url())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .connect()
        .await
        .expect("connect to the test server")
}

/// An admin connection for looking at what the library wrote.
pub async fn admin(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection")
}

/// Polls `check` every 10 ms until it is true or `limit` passes; returns whether it became true.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Subscribers of a channel, as the server counts them.
pub async fn subscribers(conn: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .expect("PUBSUB NUMSUB");
    reply.1
}

//! Helpers for the Redlock tests: N fresh masters from the testkit and a
//! Redlock over them with short timeouts.
#![allow(dead_code)]

use std::time::Duration;

use redlatch::{Client, Redlock};
use testkit::Servers;

/// Starts `n` independent masters.
pub fn masters(n: usize) -> Servers {
    Servers::start(n).expect("start redis-servers (is redis-server installed? see README)")
}

/// A Redlock over `masters` (nodes labelled with their URLs), watchdog lease `lease`.
pub async fn redlock(masters: &Servers, lease: Duration) -> Redlock {
    redlock_with(masters, lease, Duration::from_millis(500)).await
}

/// As [`redlock`], with each client's response timeout.
pub async fn redlock_with(
    masters: &Servers,
    lease: Duration,
    response_timeout: Duration,
) -> Redlock {
    let mut clients = Vec::new();
    for server in masters {
        let client = Client::builder(&server.url())
            .connect_timeout(Duration::from_secs(2))
            .response_timeout(response_timeout)
            .retries(1)
            .retry_delay(Duration::from_millis(20))
            .default_lease(lease)
            .connect()
            .await
            .expect("connect to a master");
        clients.push((server.url(), client));
    }
    Redlock::with_labels(clients).expect("redlock")
}

/// An admin connection to one master.
pub async fn admin(server: &testkit::RedisServer) -> redis::aio::MultiplexedConnection {
    // redis-rs gives up on a reply after 500 ms by default; a test's own
    // reads must not fail for a loaded machine, only for a wrong answer.
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(10)));
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("admin connection")
}

/// The hold count of `owner` in the lock hash `key` on `server` (0: none).
pub async fn hold_count(server: &testkit::RedisServer, key: &str, owner: &str) -> i64 {
    let mut conn = admin(server).await;
    let count: Option<i64> = redis::cmd("HGET")
        .arg(key)
        .arg(owner)
        .query_async(&mut conn)
        .await
        .expect("HGET");
    count.unwrap_or(0)
}

/// Polls `check` every 10 ms until it is true or `limit` passes; whether it became true.
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

/// A proxy in front of each of `masters[slow]` that delays every packet by
/// `latency` each way: the masters that answer late.
pub fn slow_proxies(masters: &Servers, slow: &[usize], latency: Duration) -> Vec<testkit::Proxy> {
    slow.iter()
        .map(|&i| {
            let proxy = testkit::Proxy::start(masters[i].addr()).unwrap();
            proxy.set_both(testkit::LinkFaults {
                latency,
                ..testkit::LinkFaults::default()
            });
            proxy
        })
        .collect()
}

//! Helpers the trust suite shares.
#![allow(dead_code)]

use std::time::Duration;

use redlatch::Client;
use testkit::RedisServer;

/// A client on `url` with the test timeouts and a watchdog lease of `lease`.
pub async fn client_at(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .connect()
        .await
        .expect("connect to the test server")
}

/// PTTL of `key` as the server sees it.
pub async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut admin = crate::common::admin(server).await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut admin)
        .await
        .unwrap()
}

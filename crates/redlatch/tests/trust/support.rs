//! Helpers the trust suite shares.
#![allow(dead_code)]

use testkit::RedisServer;

/// PTTL of `key` as the server sees it.
pub async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut admin = crate::common::admin(server).await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut admin)
        .await
        .unwrap()
}

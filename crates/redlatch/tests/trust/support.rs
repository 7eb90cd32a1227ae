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

/// A counter of `INFO <section>` (`total_connections_received` in `stats`,
/// `cmdstat_hexists` calls in `commandstats`...), 0 when absent.
pub async fn info_counter(server: &RedisServer, section: &str, name: &str) -> u64 {
    let mut admin = crate::common::admin(server).await;
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(&mut admin)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map_or(0, |value| {
            // `calls=12,usec=...` in commandstats, the number alone elsewhere.
            let value = value.strip_prefix("calls=").unwrap_or(value);
            let end = value.find(',').unwrap_or(value.len());
            value[..end].trim().parse().unwrap()
        })
}

/// Connections the server accepted so far.
pub async fn connections_received(server: &RedisServer) -> u64 {
    info_counter(server, "stats", "total_connections_received").await
}

/// HEXISTS calls the server ran so far (the loss watch's reads).
pub async fn hexists_calls(server: &RedisServer) -> u64 {
    info_counter(server, "commandstats", "cmdstat_hexists").await
}

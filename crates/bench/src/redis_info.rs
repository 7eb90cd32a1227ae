//! Figures read from the server under test with INFO: its CPU time and memory.

use redis::aio::MultiplexedConnection;

use crate::contender::no_timeout;

/// A harness connection to `url` (no response timeout).
pub async fn connect(url: &str) -> Result<MultiplexedConnection, String> {
    redis::Client::open(url)
        .map_err(|error| format!("redis URL: {error}"))?
        .get_multiplexed_async_connection_with_config(&no_timeout())
        .await
        .map_err(|error| format!("connect: {error}"))
}

/// CPU seconds redis-server has used (user + system), from INFO cpu.
pub async fn used_cpu(conn: &mut MultiplexedConnection) -> Result<f64, String> {
    let info = info(conn, "cpu").await?;
    let field = |name: &str| -> Result<f64, String> {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .ok_or_else(|| format!("INFO cpu has no {name}"))
    };
    Ok(field("used_cpu_user:")? + field("used_cpu_sys:")?)
}

/// Bytes redis-server has allocated, `used_memory` of INFO memory.
pub async fn used_memory(conn: &mut MultiplexedConnection) -> Result<i64, String> {
    info(conn, "memory")
        .await?
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| "INFO memory has no used_memory".to_owned())
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> Result<String, String> {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .map_err(|error| format!("INFO {section}: {error}"))
}

//! Talking to Redis for the hand-written recipes and the store: a
//! reconnecting connection, one command, a fresh token, `SET NX PX`.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// A connection to `url` that reconnects by itself; each call gives up
/// after `timeout`.
pub async fn connect(url: &str, timeout: Duration) -> Result<ConnectionManager, String> {
    let client = redis::Client::open(url).map_err(|error| format!("{url}: {error}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(100));
    tokio::time::timeout(
        timeout * 4,
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .map_err(|_| format!("{url}: connect timed out"))?
    .map_err(|error| format!("{url}: {error}"))
}

/// Runs one command, turning every failure into its message.
pub async fn query<T: redis::FromRedisValue>(
    conn: &mut ConnectionManager,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    cmd.query_async(conn)
        .await
        .map_err(|error| error.to_string())
}

/// `SET key token NX PX lease_ms` with a fresh token: the token, if it was set.
pub async fn set_nx_px(
    conn: &mut ConnectionManager,
    key: &str,
    lease_ms: u64,
) -> Result<Option<String>, String> {
    let token = fresh_token();
    let set: Option<String> = query(
        conn,
        redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms),
    )
    .await?;
    Ok(set.map(|_| token))
}

/// A token unique to this process and call, for recipes that tag their lock.
pub fn fresh_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

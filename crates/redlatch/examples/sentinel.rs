//! A master watched by Redis Sentinel: redlatch asks the Sentinels where the
//! master is, and asks again after a failover. With `wait_for_replicas`, an
//! acquire that no replica confirmed is undone (see docs/DEPLOYMENT.md).
//!
//! ```text
//! cargo run -p redlatch --example sentinel -- mymaster redis://10.0.0.1:26379 redis://10.0.0.2:26379
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let mut args = std::env::args().skip(1);
    let master = args.next().unwrap_or_else(|| "mymaster".to_owned());
    let mut sentinels: Vec<String> = args.collect();
    if sentinels.is_empty() {
        sentinels.push("redis://127.0.0.1:26379".to_owned());
    }
    let client = redlatch::ClientBuilder::sentinel(sentinels, &master)
        .wait_for_replicas(1, Duration::from_millis(100))
        .connect()
        .await?;
    let guard = client
        .lock("example:payout")
        .acquire_within(Some(Duration::from_secs(5)))
        .await?;
    println!(
        "holding example:payout with fencing token {}",
        guard.token()
    );
    guard.release().await
}

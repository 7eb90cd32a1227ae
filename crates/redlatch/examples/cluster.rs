//! A Redis Cluster: give any of its nodes; redlatch learns the slot map and
//! follows it through resharding and failovers.
//!
//! ```text
//! cargo run -p redlatch --example cluster -- redis://10.0.0.1:7000 redis://10.0.0.2:7000
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let mut seeds: Vec<String> = std::env::args().skip(1).collect();
    if seeds.is_empty() {
        seeds.push("redis://127.0.0.1:7000".to_owned());
    }
    let client = redlatch::ClientBuilder::cluster(seeds).connect().await?;
    // A name's lock, channel and fencing counter share its hash slot.
    let guard = client
        .lock("example:invoice")
        .acquire_within(Some(Duration::from_secs(5)))
        .await?;
    println!(
        "holding example:invoice with fencing token {}",
        guard.token()
    );
    guard.release().await
}

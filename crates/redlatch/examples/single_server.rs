//! One Redis server: take a lock, work under it, release it.
//!
//! ```text
//! cargo run -p redlatch --example single_server -- redis://127.0.0.1:6379
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let client = redlatch::Client::connect(&url).await?;
    let guard = client
        .lock("example:report")
        .acquire_within(Some(Duration::from_secs(5)))
        .await?;
    println!(
        "holding example:report with fencing token {}",
        guard.token()
    );
    guard.release().await
}

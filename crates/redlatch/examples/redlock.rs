//! Redlock over independent masters: held while a majority agrees.
//!
//! ```text
//! cargo run -p redlatch --example redlock -- redis://10.0.0.1:6379 redis://10.0.0.2:6379 redis://10.0.0.3:6379
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let mut masters: Vec<String> = std::env::args().skip(1).collect();
    if masters.is_empty() {
        masters = (6379..6382)
            .map(|port| format!("redis://127.0.0.1:{port}"))
            .collect();
    }
    let redlock = redlatch::Redlock::connect(&masters).await?;
    let guard = redlock
        .lock("example:migration")
        .acquire_within(Some(Duration::from_secs(5)))
        .await?;
    println!(
        "holding example:migration with fencing token {}",
        guard.token()
    );
    guard.release().await
}

//! TLS with a private CA and a client certificate (needs the `tls` feature).
//!
//! ```text
//! cargo run -p redlatch --features tls --example tls -- \
//!     rediss://locker:PASSWORD@redis.internal:6380 ca.crt client.crt client.key
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, ca, cert, key] = args.as_slice() else {
        eprintln!("usage: tls rediss://[USER:PASSWORD@]HOST:PORT CA.crt CLIENT.crt CLIENT.key");
        std::process::exit(64);
    };
    let client = redlatch::Client::builder(url)
        .tls(
            redlatch::TlsFiles::default()
                .with_ca(ca)
                .with_client_cert(cert, key),
        )
        .connect()
        .await?;
    let guard = client
        .lock("example:secure")
        .acquire_within(Some(Duration::from_secs(5)))
        .await?;
    println!(
        "holding example:secure with fencing token {}",
        guard.token()
    );
    guard.release().await
}

//! Acquire + release latency: Redlock over five masters beside the
//! single-server lock, one caller, no contention. Redlock sends each call to
//! every master at once, so it should cost little more than one master.
//!
//! ```text
//! cargo run --release -p redlatch --example redlock_latency
//! cargo run --release -p redlatch --example redlock_latency -- --rounds 5000 --masters 5
//! cargo run --release -p redlatch --example redlock_latency -- --one-server
//! ```
//!
//! `--one-server` points every Redlock node at the single server (each with
//! its own key prefix): the fan-out's cost on the client side alone, without
//! N server processes competing for the CPU.
//!
//! Starts throwaway `redis-server`s on free ports (testkit), warms up, then
//! times `acquire()` + `release()` for `--rounds` rounds (default 2000) on
//! each, and prints p50 / p99 / max in microseconds and the Redlock /
//! single-server ratio.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redlatch::{Client, Redlock};
use testkit::{RedisServer, Servers};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|arg| arg == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn report(label: &str, histogram: &Histogram<u64>) -> u64 {
    let p50 = histogram.value_at_quantile(0.5);
    let p99 = histogram.value_at_quantile(0.99);
    println!(
        "{label:<24} p50 {p50:>6} µs   p99 {p99:>6} µs   max {:>6} µs",
        histogram.max()
    );
    p50
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds = arg("--rounds", 2000);
    let masters_n = arg("--masters", 5);
    let single = RedisServer::start()?;
    let masters = Servers::start(masters_n)?;

    let client = Client::connect(&single.url()).await?;
    let lock = client.lock("bench:single");
    let redlock = if std::env::args().any(|arg| arg == "--one-server") {
        let mut clients = Vec::new();
        for i in 0..masters_n {
            let prefix = format!("node{i}:");
            clients.push(
                Client::builder(&single.url())
                    .key_prefix(prefix)
                    .connect()
                    .await?,
            );
        }
        Redlock::new(clients)?
    } else {
        Redlock::connect(&masters.urls()).await?
    };
    let red = redlock.lock("bench:redlock");

    let mut single_hist = Histogram::<u64>::new(3)?;
    let mut red_hist = Histogram::<u64>::new(3)?;
    for _ in 0..rounds / 10 {
        lock.acquire().await?.release().await?;
        red.acquire().await?.release().await?;
    }
    // Interleaved, so both see the same machine load.
    for _ in 0..rounds {
        let started = Instant::now();
        lock.acquire().await?.release().await?;
        single_hist.record(micros(started.elapsed()))?;
        let started = Instant::now();
        red.acquire().await?.release().await?;
        red_hist.record(micros(started.elapsed()))?;
    }
    println!("acquire + release, {rounds} rounds, one caller");
    let single_p50 = report("single server", &single_hist);
    let red_p50 = report(&format!("Redlock, {masters_n} masters"), &red_hist);
    println!(
        "ratio p50 {:.2}, p99 {:.2}",
        red_p50 as f64 / single_p50.max(1) as f64,
        red_hist.value_at_quantile(0.99) as f64 / single_hist.value_at_quantile(0.99).max(1) as f64
    );
    Ok(())
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

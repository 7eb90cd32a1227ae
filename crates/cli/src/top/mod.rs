//! `redlatch top`: the locks under a prefix, refreshed live: who holds
//! each, for how much longer, how many wait, how often it changes hands.
//! A terminal view by default, `--json` one object per refresh for scripts,
//! `--once` a single refresh. Redis going away does not end it: it says
//! "disconnected, retrying" and goes on refreshing until Redis is back.

mod row;
mod sample;
mod table;
mod view;

use std::time::Duration;

use crate::exit::Failure;
use crate::global::Global;
use sample::{Sampler, Snapshot, retried};
pub use table::{SortKey, natural};

/// Arguments of `redlatch top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Only locks whose names start with this (in the terminal view, `/`
    /// narrows further)
    #[arg(long, value_name = "P", default_value = "")]
    pub prefix: String,

    /// Time between two refreshes
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Print one refresh and exit (with --json: one JSON object); an error
    /// reaching Redis then fails (exit 69) instead of being retried
    #[arg(long)]
    pub once: bool,

    /// Order of the locks: name (numbers in names compared as numbers:
    /// a:2 before a:10), ttl (shortest lease first), waiters (most first),
    /// rate (acquisitions per second, most first); the `s` key cycles
    #[arg(long, value_enum, value_name = "KEY", default_value = "name")]
    pub sort: SortKey,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if interval < Duration::from_millis(100) || interval > Duration::from_secs(3600) {
        return Err("the interval goes from 100ms to 1h".to_owned());
    }
    Ok(interval)
}

/// Runs until interrupted (or once): the terminal view when stdout is a
/// terminal, else one JSON object (`--json`) or one table per refresh.
///
/// Each lock in `--json` is `status --json`'s object (TTL as `ttl_ms`, in
/// milliseconds) with `kind`, `waiters`, `acquisitions_per_s` and
/// `longest_wait_ms` added; a refresh that cannot reach Redis is
/// `{"at":..,"disconnected":true,"error":"..","locks":[]}`.
pub async fn top(global: &Global, args: TopArgs) -> Result<u8, Failure> {
    let mut sampler = Sampler::new(global, args.prefix.clone(), args.sort);
    let interactive =
        !global.json && !args.once && std::io::IsTerminal::is_terminal(&std::io::stdout());
    if interactive {
        return view::run(&mut sampler, args.interval).await;
    }
    loop {
        let snapshot = match sampler.sample().await {
            Ok(snapshot) => snapshot,
            Err(failure) if retried(&failure, args.once) => Snapshot::disconnected(&failure),
            Err(failure) => return Err(failure),
        };
        let text = if global.json {
            crate::output::json(&snapshot)?
        } else if let Some(error) = &snapshot.error {
            format!(
                "disconnected, retrying every {}: {error}",
                humantime::format_duration(args.interval)
            )
        } else {
            table::render(&snapshot.locks)
        };
        crate::output::emit(&text)?;
        if args.once {
            return Ok(0);
        }
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            // Interrupting a live view is how it ends: not a failure.
            _ = tokio::signal::ctrl_c() => return Ok(0),
        }
    }
}

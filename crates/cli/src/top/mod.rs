//! `redlatch top`: the locks under a prefix, refreshed live: who holds
//! each, for how much longer, how many wait, how often it changes hands.
//! A terminal view by default, `--json` one object per refresh for scripts,
//! `--once` a single refresh.

mod sample;
mod table;
mod view;

use std::time::Duration;

use crate::Global;
use crate::connect;
use crate::exit::Failure;
use sample::Sampler;

/// Arguments of `redlatch top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Only locks whose names start with this
    #[arg(long, value_name = "P", default_value = "")]
    pub prefix: String,

    /// Time between two refreshes
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Print one refresh and exit (with --json: one JSON object)
    #[arg(long)]
    pub once: bool,
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
pub async fn top(global: &Global, args: TopArgs) -> Result<u8, Failure> {
    let settings = connect::load_settings(global.config.as_deref())?;
    let client = connect::client(global, "top", settings, None, None).await?;
    let mut sampler = Sampler::new(client, args.prefix.clone());
    let interactive =
        !global.json && !args.once && std::io::IsTerminal::is_terminal(&std::io::stdout());
    if interactive {
        return view::run(&mut sampler, args.interval).await;
    }
    loop {
        let snapshot = sampler.sample().await?;
        let text = if global.json {
            crate::output::json(&snapshot)?
        } else {
            table::render(&snapshot)
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

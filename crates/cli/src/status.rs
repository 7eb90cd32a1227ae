//! `redlatch status NAME`: one lock, as Redis holds it now.

use crate::Global;
use crate::connect;
use crate::exit::Failure;
use crate::output::{self, StatusJson};

/// Arguments of `redlatch status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Lock name (the Redis key, after the config file's key_prefix)
    pub name: String,
}

/// Prints holders, hold counts, TTL, last fencing token and waiting clients.
pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    let settings = connect::load_settings(global.config.as_deref())?;
    let client = connect::client(&global.redis, settings, None).await?;
    let status = client
        .lock(args.name.as_str())
        .status()
        .await
        .map_err(|error| Failure::lib(&format!("status of lock {}", args.name), &error))?;
    let text = if global.json {
        output::json(&StatusJson::from(&status))?
    } else {
        output::status_text(&status)
    };
    output::emit(&text)?;
    Ok(0)
}

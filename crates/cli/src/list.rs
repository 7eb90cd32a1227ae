//! `redlatch list`: the locks held now, found with SCAN (never KEYS).

use crate::Global;
use crate::connect;
use crate::exit::Failure;
use crate::output::{self, StatusJson};

/// Arguments of `redlatch list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only locks whose names start with this
    #[arg(long, value_name = "P", default_value = "")]
    pub prefix: String,
}

/// Prints one line (or one JSON object) per held lock, sorted by name.
pub async fn list(global: &Global, args: ListArgs) -> Result<u8, Failure> {
    let settings = connect::load_settings(global.config.as_deref())?;
    let client = connect::client(global, "list", settings, None, None).await?;
    let locks = client
        .locks(&args.prefix)
        .await
        .map_err(|error| connect::call_failure(global, "list", &error))?;
    if global.json {
        let all: Vec<StatusJson<'_>> = locks.iter().map(StatusJson::from).collect();
        output::emit(&output::json(&all)?)?;
    } else if !locks.is_empty() {
        let lines: Vec<String> = locks.iter().map(output::list_line).collect();
        output::emit(&lines.join("\n"))?;
    }
    Ok(0)
}

//! `redlatch list`: the locks held now, found with SCAN (never KEYS); over
//! Redlock masters (several `--redis`), every lock held on any master with
//! the majority's verdict.

use crate::exit::Failure;
use crate::global::Global;
use crate::locks;
use crate::output;

/// Arguments of `redlatch list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only locks whose names start with this
    #[arg(long, value_name = "P", default_value = "")]
    pub prefix: String,
}

/// Prints one line (or one JSON object, as `status --json`'s) per held
/// lock, sorted by name (numbers in names as numbers: `a:2` before `a:10`).
pub async fn list(global: &Global, args: ListArgs) -> Result<u8, Failure> {
    let source = locks::connect_source(global, "list").await?;
    let mut locks = source.locks(global, "list", &args.prefix).await?;
    locks.sort_by(|a, b| crate::top::natural(&a.name, &b.name));
    if global.json {
        output::emit(&output::json(&locks)?)?;
    } else if !locks.is_empty() {
        let lines: Vec<String> = locks.iter().map(locks::LockView::list_line).collect();
        output::emit(&lines.join("\n"))?;
    }
    Ok(0)
}

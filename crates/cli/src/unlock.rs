//! `redlatch unlock NAME --force`: delete a lock whoever holds it.

use crate::Global;
use crate::connect;
use crate::exit::{self, Failure};
use crate::output;

/// Arguments of `redlatch unlock`.
#[derive(Debug, clap::Args)]
pub struct UnlockArgs {
    /// Lock name (the Redis key, after the config file's key_prefix)
    pub name: String,

    /// Required: confirms that breaking the holder's mutual exclusion is intended
    #[arg(long)]
    pub force: bool,
}

/// Force-unlocks, after refusing without `--force` (exit 64).
pub async fn unlock(global: &Global, args: UnlockArgs) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "refusing to unlock {}: force-unlocking breaks the current holder's mutual exclusion; pass --force if you are sure",
                output::shown(&args.name)
            ),
        ));
    }
    let settings = connect::load_settings(global.config.as_deref())?;
    let client = connect::client(global, "unlock", settings, None, None).await?;
    let deleted = client
        .lock(args.name.as_str())
        .force_unlock()
        .await
        .map_err(|error| {
            connect::call_failure(
                global,
                &format!("unlock {}", output::shown(&args.name)),
                &error,
            )
        })?;
    let text = if global.json {
        output::json(&serde_json::json!({ "name": args.name, "deleted": deleted }))?
    } else if deleted {
        format!("lock {} deleted", output::shown(&args.name))
    } else {
        format!(
            "lock {} was not held; nothing deleted",
            output::shown(&args.name)
        )
    };
    output::emit(&text)?;
    Ok(0)
}

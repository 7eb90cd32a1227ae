//! `redlatch unlock NAME --force`: delete a lock whoever holds it; over
//! Redlock masters (several `--redis`), on every master.

use serde::Serialize;

use crate::connect;
use crate::exit::{self, Failure};
use crate::global::Global;
use crate::locks::{self, Source};
use crate::names;
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
                names::shown(&args.name)
            ),
        ));
    }
    let context = format!("unlock {}", names::shown(&args.name));
    let masters = match locks::connect_source(global, "unlock").await? {
        Source::One(client) => {
            let deleted = force_unlock(&client, &args.name)
                .await
                .map_err(|error| connect::call_failure(global, &context, &error))?;
            let text = if global.json {
                output::json(&serde_json::json!({ "name": args.name, "deleted": deleted }))?
            } else if deleted {
                format!("lock {} deleted", names::shown(&args.name))
            } else {
                format!(
                    "lock {} was not held; nothing deleted",
                    names::shown(&args.name)
                )
            };
            output::emit(&text)?;
            return Ok(0);
        }
        Source::Masters(masters) => masters,
    };
    // Every master, failed ones included, so that the report names them all.
    let mut nodes = Vec::with_capacity(masters.len());
    for master in &masters {
        let outcome = match &master.client {
            Ok(client) => force_unlock(client, &args.name)
                .await
                .map_err(|error| error.to_string()),
            Err(error) => Err(error.clone()),
        };
        nodes.push(NodeUnlock {
            node: master.label.clone(),
            deleted: outcome.as_ref().ok().copied(),
            error: outcome.err(),
        });
    }
    let answered = nodes.iter().filter(|node| node.error.is_none()).count();
    let quorum = nodes.len() / 2 + 1;
    let report = RedlockUnlock {
        name: &args.name,
        deleted: nodes.iter().any(|node| node.deleted == Some(true)),
        answered,
        quorum,
        nodes,
    };
    let text = if global.json {
        output::json(&report)?
    } else {
        report.text()
    };
    output::emit(&text)?;
    if answered < quorum {
        // The lock may still be held on a majority: say so in the status.
        return Err(Failure::new(
            exit::UNAVAILABLE,
            format!(
                "{context}: only {answered} of {} masters answered ({quorum} needed); the lock may still be held",
                report.nodes.len()
            ),
        ));
    }
    Ok(0)
}

/// Deletes the lock `name` whoever holds it: a lock hash, or else a string
/// lock (a token lock, or another library's `SET key token NX PX lease`).
async fn force_unlock(client: &redlatch::Client, name: &str) -> redlatch::Result<bool> {
    match client.lock(name).force_unlock().await {
        // Not a hash: the string lock's own force-unlock, which in turn
        // leaves any other type alone (WrongType).
        Err(redlatch::Error::WrongType { .. }) => client.token_lock(name).force_unlock().await,
        outcome => outcome,
    }
}

/// `unlock --json` over Redlock masters.
#[derive(Debug, Serialize)]
struct RedlockUnlock<'a> {
    name: &'a str,
    /// True when some master had it and deleted it.
    deleted: bool,
    answered: usize,
    quorum: usize,
    nodes: Vec<NodeUnlock>,
}

/// What one master did.
#[derive(Debug, Serialize)]
struct NodeUnlock {
    node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    deleted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl RedlockUnlock<'_> {
    /// One line per master, then the verdict.
    fn text(&self) -> String {
        let mut lines: Vec<String> = self
            .nodes
            .iter()
            .map(|node| match (node.deleted, &node.error) {
                (Some(true), _) => format!("master {}: deleted", node.node),
                (Some(false), _) => format!("master {}: not held there", node.node),
                (None, Some(error)) => format!("master {}: error: {error}", node.node),
                (None, None) => format!("master {}: ?", node.node),
            })
            .collect();
        lines.push(if self.deleted {
            format!("lock {} deleted", names::shown(self.name))
        } else {
            format!(
                "lock {} was not held; nothing deleted",
                names::shown(self.name)
            )
        });
        lines.join("\n")
    }
}

//! `redlatch status NAME`: one lock, as Redis holds it now (on each master
//! when `--redis` is given several times).

use redlatch::{LockStatus, RedlockStatus};
use serde::Serialize;

use crate::config_file;
use crate::connect;
use crate::exit::Failure;
use crate::global::Global;
use crate::locks::LockView;
use crate::names;
use crate::output;
use crate::waits::Waits;

/// Arguments of `redlatch status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Lock name (the Redis key, after the config file's key_prefix)
    pub name: String,
    /// Also say what the server offered at connect: its version, whether the
    /// scripts run as a function library, WAITAOF
    #[arg(short, long)]
    pub verbose: bool,
    /// Exit 0 when the lock is held and 1 when it is free, for scripts
    /// (`if redlatch status --held NAME; then ...`); without it, status exits
    /// 0 either way
    #[arg(long)]
    pub held: bool,
}

/// Prints holders, hold counts, TTL, last fencing token and waiting clients.
pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    let settings = config_file::load_settings(global.config.as_deref())?;
    if global.deployment()?.is_redlock() {
        let redlock = connect::redlock(global, settings, None).await?;
        let status = redlock.lock(args.name.as_str()).status().await;
        return show(global, &args, status, None);
    }
    let client = connect::client(global, "status", settings, None, None, None, false).await?;
    let server = args.verbose.then(|| client.capabilities().summary());
    let status = match client.lock(args.name.as_str()).status().await {
        // Not a lock hash: a string lock (a token lock, or another
        // library's `SET key token NX PX lease`) reads as one.
        Err(redlatch::Error::WrongType { .. }) => {
            client.token_lock(args.name.as_str()).status().await
        }
        status => status,
    };
    let waits = match &status {
        Ok(status) => {
            let known = [LockView::single(status).known()];
            Waits::read_quietly(&client, &known).await
        }
        Err(_) => None,
    };
    let status = status.map(|status| WithWaits { status, waits });
    show(global, &args, status, server.as_deref())
}

/// One server's status, with who waits for whom around the lock.
struct WithWaits {
    status: LockStatus,
    waits: Option<Waits>,
}

impl Shown for WithWaits {
    fn view(&self) -> LockView {
        let mut view = LockView::single(&self.status);
        if let Some(waits) = &self.waits {
            view.add_waits(waits);
        }
        view
    }

    fn text(&self) -> String {
        let mut text = output::status_text(&self.status);
        if let Some(waits) = &self.waits {
            for line in waits.status_lines(&self.status.name) {
                text.push('\n');
                text.push_str(&line);
            }
        }
        text
    }

    fn held(&self) -> bool {
        self.status.held
    }
}

/// Prints the status of a lock, either kind; `server` is what the server
/// offered at connect, for `--verbose`.
fn show(
    global: &Global,
    args: &StatusArgs,
    status: redlatch::Result<impl Shown>,
    server: Option<&str>,
) -> Result<u8, Failure> {
    let status = status.map_err(|error| status_failure(global, &args.name, &error))?;
    let text = if global.json {
        let status = status.view();
        match server {
            Some(server) => output::json(&Verbose { status, server })?,
            None => output::json(&status)?,
        }
    } else {
        let mut text = status.text();
        if let Some(server) = server {
            text = format!("{}\nserver   {server}\n", text.trim_end_matches('\n'));
        }
        text
    };
    output::emit(&text)?;
    Ok(exit_status(args, status.held()))
}

/// A status as `status` prints it: one server's, or every master's.
trait Shown {
    /// The JSON object.
    fn view(&self) -> LockView;
    /// The text for people.
    fn text(&self) -> String;
    /// Whether it is held (on a majority, for Redlock).
    fn held(&self) -> bool;
}

impl Shown for RedlockStatus {
    fn view(&self) -> LockView {
        LockView::from_redlock(self)
    }

    fn text(&self) -> String {
        redlock_text(self)
    }

    fn held(&self) -> bool {
        self.majority_holder().is_some()
    }
}

/// `status --json --verbose`: the status, and what the server offered.
#[derive(Debug, Serialize)]
struct Verbose<'a> {
    #[serde(flatten)]
    status: LockView,
    server: &'a str,
}

/// The failure of a status call on lock `name`.
fn status_failure(global: &Global, name: &str, error: &redlatch::Error) -> Failure {
    connect::call_failure(
        global,
        &format!("status of lock {}", names::shown(name)),
        error,
    )
}

/// 0, or with `--held` 1 for a free lock.
fn exit_status(args: &StatusArgs, held: bool) -> u8 {
    if args.held && !held {
        crate::exit::FREE
    } else {
        0
    }
}

/// `status` for people over several masters.
fn redlock_text(status: &RedlockStatus) -> String {
    let nodes = status.nodes.len();
    let mut lines = vec![format!("lock     {}", status.name)];
    lines.push(match status.majority_holder() {
        Some(owner) => format!(
            "held     yes, by {owner} (on a majority: {} of {nodes} needed)",
            status.quorum
        ),
        None => format!(
            "held     no (no owner on {} of {nodes} masters)",
            status.quorum
        ),
    });
    lines.push(format!("answered {} of {nodes} masters", status.answered()));
    lines.push(format!(
        "token    {}",
        status
            .last_token()
            .map_or_else(|| "-".to_owned(), |token| token.to_string())
    ));
    for node in &status.nodes {
        lines.push(String::new());
        lines.push(format!("master   {}", node.node));
        match &node.status {
            Ok(one) => lines.extend(
                output::status_text(one)
                    .lines()
                    .filter(|line| !line.starts_with("lock "))
                    .map(|line| format!("  {line}")),
            ),
            Err(error) => lines.push(format!("  error  {error}")),
        }
    }
    lines.join("\n")
}

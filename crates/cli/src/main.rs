//! `redlatch`: run a command under a distributed lock held in Redis, and
//! inspect or break locks. The command-line face of the `redlatch` library;
//! usage, examples and exit statuses are in `crates/cli/README.md`.

mod check;
mod config_file;
mod connect;
mod exit;
mod global;
mod job;
mod list;
mod locks;
mod names;
mod output;
mod redact;
mod run;
mod secrets;
mod signals;
mod status;
mod top;
mod unlock;
mod waits;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::exit::Failure;
use crate::global::Global;

/// The longest a command's exit waits for the runtime to stop: the
/// library's last word (a holder record deleted on a connection of its own)
/// takes a second at most.
const RUNTIME_SHUTDOWN_LIMIT: Duration = Duration::from_secs(2);

const ABOUT: &str =
    "Distributed locks on Redis: run a command under a lock, inspect and break locks";

const LONG_ABOUT: &str = "\
Distributed locks on Redis: run a command under a lock, inspect and break locks.

`redlatch run NAME -- COMMAND` is flock(1) across machines: it waits for the
lock, runs COMMAND while the lock is renewed, and releases it when COMMAND
exits. If the lock is lost meanwhile, COMMAND is stopped. The locks are
Redisson-compatible reentrant locks with fencing tokens.

Durations are written like 500ms, 30s, 2m, 1h 30m.";

/// Command line of `redlatch`.
#[derive(Debug, Parser)]
#[command(
    name = "redlatch",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = exit::TABLE,
    propagate_version = true
)]
struct Cli {
    // Under a heading of their own, after each command's own options.
    #[command(flatten, next_help_heading = "Connection and output")]
    global: Global,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command while holding a lock (flock(1) across machines)
    #[command(after_long_help = exit::TABLE)]
    Run(run::RunArgs),
    /// Show a lock: holders (host, pid, program, purpose, since when) and hold
    /// counts, TTL, last fencing token, waiting clients
    Status(status::StatusArgs),
    /// List the locks held now (SCAN, never KEYS)
    List(list::ListArgs),
    /// Delete a lock whoever holds it (needs --force)
    Unlock(unlock::UnlockArgs),
    /// Watch the locks live: holders, TTL, token, waiters, acquisitions/s;
    /// keeps retrying while Redis is away (--json: one object per refresh,
    /// TTL in ms as status --json; --once: one refresh)
    Top(top::TopArgs),
    /// Safety lab: run lock recipes under faults and report which hold
    /// (starts its own throwaway redis-servers; --redis is not used)
    #[command(after_long_help = check::EXIT_TABLE)]
    Check(check::CheckArgs),
    /// One worker process of `check` (started by `check` itself)
    #[command(name = "__check-worker", hide = true)]
    CheckWorker(check::WorkerArgs),
    /// Kills a `run` job's process group when `run` dies (started by `run`)
    #[command(name = "__job-reaper", hide = true)]
    JobReaper(job::ReaperArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            if let Some(tip) = command_without_dashes(&error) {
                let text = error.render().to_string();
                // After the error line, where clap puts its own tips.
                match text.split_once('\n') {
                    Some((first, rest)) => eprint!("{first}\n\n  tip: {tip}\n{rest}"),
                    None => eprintln!("{text}\n  tip: {tip}"),
                }
            } else {
                let _ = error.print();
            }
            // --help and --version are "errors" printed to stdout.
            return ExitCode::from(if error.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    if let Command::JobReaper(args) = &cli.command {
        // No runtime, no logging: it only waits for `run` to go.
        return ExitCode::from(job::reaper(args));
    }
    init_logging();
    std::panic::set_hook(Box::new(|info| {
        let text = info.to_string().replace('\n', " ");
        eprintln!("redlatch: internal error (please report it): {text}");
        std::process::exit(i32::from(exit::SOFTWARE));
    }));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("redlatch: cannot start the async runtime: {error}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("{failure}");
            failure.code
        }
    };
    // Stop the runtime before leaving: the clients' tasks are dropped with
    // it, and a client dropped so takes what it left in Redis (its holder
    // record) with it, within a second. Anything else still running (the
    // settings watcher's thread) is not waited for.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_LIMIT);
    std::process::exit(i32::from(code));
}

/// `run NAME COMMAND...` without `--`: clap sees COMMAND as an unexpected
/// argument. The tip to give then.
fn command_without_dashes(error: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|arg| arg == "run") || args.iter().any(|arg| arg == "--") {
        return None;
    }
    match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) if !arg.starts_with('-') => {
            Some("the command goes after `--`: redlatch run NAME [OPTIONS] -- COMMAND [ARGS...]")
        }
        _ => None,
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    match cli.command {
        Command::Run(args) => run::run(&cli.global, args).await,
        Command::Status(args) => status::status(&cli.global, args).await,
        Command::List(args) => list::list(&cli.global, args).await,
        Command::Unlock(args) => unlock::unlock(&cli.global, args).await,
        Command::Top(args) => top::top(&cli.global, args).await,
        Command::Check(args) => {
            let json = cli.global.json;
            tokio::task::spawn_blocking(move || check::check(json, args))
                .await
                .map_err(|error| Failure::new(exit::SOFTWARE, format!("check: {error}")))?
        }
        Command::CheckWorker(args) => check::worker(args).await,
        Command::JobReaper(args) => Ok(job::reaper(&args)),
    }
}

/// Logs to stderr; `RUST_LOG` filters. By default warnings, except the
/// watchdog's "lock lost", which `run` reports in its own one line (set
/// `RUST_LOG=warn` to see the watchdog's reason too).
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,redlatch::renewal=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(redact::RedactedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

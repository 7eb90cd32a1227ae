//! `redlatch run`: a command under a lock, like flock(1) across machines.
//!
//! Order of events: signal handlers, settings, connection, settings watch,
//! acquire (bounded by `--wait`), spawn, then wait for whichever comes first:
//! the command's exit (release, exit with its status), a lost lock (SIGTERM
//! to the command's process group, SIGKILL after `--kill-after`, exit 79
//! once the group is empty), or a signal (forwarded to the group). The
//! command runs as a job: see `job`.

use std::ffi::OsString;
use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use nix::sys::signal::Signal;
use redlatch::{
    AcquireLock, Client, Fenced, Guard, RedlockGuard, Settings, SettingsWatcher, TimeLimit,
};
use tokio::time::Instant;

use crate::config_file;
use crate::connect::{self, WaitLimit};
use crate::exit::{self, Failure};
use crate::global::Global;
use crate::job;
use crate::locks::LockView;
use crate::names;
use crate::redact;
use crate::secrets;
use crate::signals::Signals;

/// Arguments of `redlatch run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Lock name (the Redis key, after the config file's key_prefix)
    pub name: String,

    /// Lease of the lock, renewed every third of it while the command runs;
    /// if redlatch dies, others get the lock at most this long after
    /// [default: the config file's default_lease, else 30s]
    #[arg(long, value_name = "DUR", value_parser = parse_lease)]
    pub lease: Option<Duration>,

    /// Longest wait for the lock; 0 tries once. Connecting gets no longer
    /// than this either, nor than the connect timeout [default: the config
    /// file's wait_timeout, else forever]
    #[arg(long, value_name = "DUR", value_parser = humantime::parse_duration)]
    pub wait: Option<Duration>,

    /// Owner name written in the lock (after this process's client id)
    /// [default: the job's, from REDLATCH_JOB when a `redlatch run` started
    /// this one, else a new `job:<client-id>`]. The command gets it in
    /// REDLATCH_JOB: the runs it starts take their locks as the same owner,
    /// one party for deadlock detection
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,

    /// What the lock is held for, shown with this holder by status, the JSON
    /// of list and top, and a run that finds the lock busy [default: `run:
    /// PROGRAM`, the command's file name without its arguments, which may
    /// carry secrets]
    #[arg(long, value_name = "TEXT")]
    pub purpose: Option<String>,

    /// When the lock is lost: time between SIGTERM and SIGKILL to the
    /// command's process group (the command runs in a group of its own)
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = humantime::parse_duration)]
    pub kill_after: Duration,

    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `--lease`: a duration the watchdog can renew (checked here, so the
/// message names the flag).
fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if lease < redlatch::Settings::MIN_WATCHDOG_LEASE || lease > redlatch::Settings::MAX_LEASE {
        return Err(format!(
            "must be between {} and {}",
            humantime::format_duration(redlatch::Settings::MIN_WATCHDOG_LEASE),
            humantime::format_duration(redlatch::Settings::MAX_LEASE)
        ));
    }
    Ok(lease)
}

/// Runs the command under the lock; the exit status to leave with.
pub async fn run(global: &Global, args: RunArgs) -> Result<u8, Failure> {
    if global.json {
        return Err(Failure::new(
            exit::USAGE,
            "run has no JSON output (the command's own output passes through); \
             --json applies to status, list, unlock, top and check",
        ));
    }
    // First, so that a Ctrl-C while we connect or wait is ours to handle.
    let mut signals = Signals::install().map_err(|error| {
        Failure::new(
            exit::SOFTWARE,
            format!("cannot install signal handlers: {error}"),
        )
    })?;
    let settings = config_file::load_settings(global.config.as_deref())?;
    // Which kind of lock, `--redis` says at run time: the rest is written once.
    if global.deployment()?.is_redlock() {
        let taking = take_redlock(global, &args, settings);
        under_lock(taking, &args, &mut signals, None).await
    } else {
        // The client, once connected: a wait stopped by a signal lets its
        // background undos (its wait-for edge's delete) finish first.
        let connected = OnceLock::new();
        let taking = take_lock(global, &args, settings, &connected);
        under_lock(taking, &args, &mut signals, Some(&connected)).await
    }
}

/// Waits for `taking` (a signal stops the wait), then runs the command
/// under the lock. `connected`: the client `taking` connected, if any.
async fn under_lock<G: ReleaseBeforeExit>(
    taking: impl Future<Output = Result<Held<G>, Failure>>,
    args: &RunArgs,
    signals: &mut Signals,
    connected: Option<&OnceLock<Client>>,
) -> Result<u8, Failure> {
    let mut taking = Box::pin(taking);
    let held = tokio::select! {
        held = &mut taking => held?,
        received = signals.recv() => {
            // Dropping an acquire leaves nothing behind in Redis once the
            // client's background undos have run (its wait-for edge's
            // delete): they would die with the process.
            drop(taking);
            if let Some(client) = connected.and_then(OnceLock::get) {
                settle(client).await;
            }
            return Err(Failure::new(
                exit::SIGNAL_BASE + received as u8,
                format!("{received} while waiting for lock {}; the command did not run", names::shown(&args.name)),
            ));
        }
    };
    tracing::debug!(lock = %args.name, token = held.guard.token(), "acquired");
    // The watcher and the lease pin live until the command is done.
    let Held {
        guard,
        _watchers,
        job,
    } = held;
    supervise(guard, job.as_deref(), args, signals).await
}

/// A hold, as `run` gives it back: before the process exits.
trait ReleaseBeforeExit: Fenced + Sized {
    /// Gives the hold back; for Redlock, also waits for the slower masters,
    /// so no minority of holds waits out its lease after we exit.
    fn release_before_exit(self) -> impl Future<Output = redlatch::Result<()>> {
        self.release()
    }
}

impl ReleaseBeforeExit for Guard {}

impl ReleaseBeforeExit for RedlockGuard {
    fn release_before_exit(self) -> impl Future<Output = redlatch::Result<()>> {
        self.release_everywhere()
    }
}

/// A lock taken, with what must live as long as it is held.
struct Held<G> {
    guard: G,
    /// Keep the clients' settings in step with `--config` (one per node).
    _watchers: Vec<SettingsWatcher>,
    /// The job's owner name, passed on in REDLATCH_JOB (not for Redlock).
    job: Option<String>,
}

/// Waits (a second at most) for `client`'s background tasks to end.
async fn settle(client: &Client) {
    let until = Instant::now() + Duration::from_secs(1);
    while client.background_tasks() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Connection, settings watch, then the acquire `--wait` allows; the
/// client, once connected, in `connected`.
async fn take_lock(
    global: &Global,
    args: &RunArgs,
    settings: Settings,
    connected: &OnceLock<Client>,
) -> Result<Held<Guard>, Failure> {
    // `--wait` counts from here: connecting and acquiring share it.
    let started = Instant::now();
    let limit = wait_limit(args, &settings);
    let purpose = purpose(args);
    let client = connect::client(
        global,
        "run",
        settings,
        args.lease,
        Some(&purpose),
        limit,
        true,
    )
    .await?;
    let _ = connected.set(client.clone());
    let watchers = watch(global, args, std::slice::from_ref(&client))?;
    let wait = args.wait.or(client.settings().wait_timeout);
    let owner = job_owner(args, &client);
    let lock = client.lock(args.name.as_str()).with_owner(owner.as_str());
    let busy = busy(lock.status(), LockView::single);
    let mut held = hold(global, args, &lock, (wait, started), busy, watchers).await?;
    held.job = Some(owner);
    Ok(held)
}

/// The environment variable that carries a job's owner name to the
/// commands it runs.
pub const JOB_ENV: &str = "REDLATCH_JOB";

/// The owner `run` takes its lock as: `--owner`, else the job that started
/// this run (REDLATCH_JOB), else a new job named after this client. A job
/// and the runs it starts are then one named owner: one party to deadlock
/// detection, so two jobs nesting runs in opposite orders are a deadlock
/// the library names instead of a wait for ever.
fn job_owner(args: &RunArgs, client: &redlatch::Client) -> String {
    if let Some(owner) = &args.owner {
        return owner.clone();
    }
    match std::env::var(JOB_ENV) {
        Ok(job) if !job.is_empty() => job,
        _ => format!("job:{}", client.id()),
    }
}

/// The purpose `run` publishes: `--purpose`, else `run: PROGRAM` (the file
/// name alone: arguments and directories may name secrets).
fn purpose(args: &RunArgs) -> String {
    if let Some(purpose) = &args.purpose {
        return purpose.clone();
    }
    let program = std::path::Path::new(&args.command[0])
        .file_name()
        .unwrap_or(args.command[0].as_os_str())
        .to_string_lossy()
        .into_owned();
    format!("run: {program}")
}

/// How long a "busy" message may wait to say who holds the lock.
const BUSY_STATUS_LIMIT: Duration = Duration::from_millis(500);

/// Who holds the lock and for how much longer, read once `run` gives up;
/// `None` if the status cannot be read at once (the message then says less).
async fn busy<S, E>(
    status: impl std::future::Future<Output = Result<S, E>>,
    view: impl FnOnce(&S) -> LockView,
) -> Option<String> {
    let status = tokio::time::timeout(BUSY_STATUS_LIMIT, status)
        .await
        .ok()?
        .ok()?;
    view(&status).busy_text(SystemTime::now())
}

/// As `take_lock`, with Redlock over every `--redis` master.
async fn take_redlock(
    global: &Global,
    args: &RunArgs,
    mut settings: Settings,
) -> Result<Held<RedlockGuard>, Failure> {
    if args.owner.is_some() {
        return Err(Failure::new(
            exit::USAGE,
            "--owner needs a single --redis: Redlock owners are drawn per acquisition",
        ));
    }
    if let Some(lease) = args.lease {
        settings.default_lease = lease;
    }
    let started = Instant::now();
    let limit = wait_limit(args, &settings);
    let redlock = connect::redlock(global, settings, limit).await?;
    let watchers = watch(global, args, &redlock.clients())?;
    let wait = args.wait.or(redlock
        .clients()
        .first()
        .and_then(|client| client.settings().wait_timeout));
    // Redlock has no deadlock detection: REDLATCH_JOB is left as it is.
    let lock = redlock.lock(args.name.as_str());
    let busy = busy(lock.status(), LockView::from_redlock);
    hold(global, args, &lock, (wait, started), busy, watchers).await
}

/// The acquire `--wait` allows on `lock`, either kind, within what is left
/// of the wait counted from `started` (connecting took the rest: one
/// deadline for the whole run); `busy` says who holds it, read only if
/// another owner kept it.
async fn hold<L: AcquireLock>(
    global: &Global,
    args: &RunArgs,
    lock: &L,
    (wait, started): (Option<Duration>, Instant),
    busy: impl Future<Output = Option<String>>,
    watchers: Vec<SettingsWatcher>,
) -> Result<Held<L::Guard>, Failure> {
    let acquired = match (
        acquire(lock, wait.map(|wait| left_of(wait, started))).await,
        wait,
    ) {
        // The share left after connecting ran out: it is `--wait` that did.
        (
            Err(redlatch::Error::ResponseTimeout {
                op,
                limit: TimeLimit::Wait(_),
            }),
            Some(wait),
        ) => Err(redlatch::Error::ResponseTimeout {
            op,
            limit: TimeLimit::Wait(wait),
        }),
        (acquired, _) => acquired,
    };
    let busy = match acquired {
        Ok(None) => busy.await,
        _ => None,
    };
    held(global, args, wait, acquired, busy, watchers)
}

/// The wait that also bounds connecting: `--wait`, else the file's `lock.wait_timeout`.
fn wait_limit(args: &RunArgs, settings: &Settings) -> Option<WaitLimit> {
    match (args.wait, settings.wait_timeout) {
        (Some(limit), _) => Some(WaitLimit {
            limit,
            name: "--wait",
        }),
        (None, Some(limit)) => Some(WaitLimit {
            limit,
            name: "lock.wait_timeout",
        }),
        (None, None) => None,
    }
}

/// Follows `--config` on every client; `--lease` wins over the file at every reload.
fn watch(
    global: &Global,
    args: &RunArgs,
    clients: &[redlatch::Client],
) -> Result<Vec<SettingsWatcher>, Failure> {
    let Some(path) = &global.config else {
        return Ok(Vec::new());
    };
    let lease = args.lease;
    clients
        .iter()
        .map(|client| {
            client
                .watch_settings_with(path, move |settings| {
                    if let Some(lease) = lease {
                        settings.default_lease = lease;
                    }
                })
                .map_err(|error| config_file::config_failure(path, &error))
        })
        .collect()
}

/// The outcome of an acquire, as `run` reports it; `busy` says who holds
/// the lock when another owner kept it.
fn held<G>(
    global: &Global,
    args: &RunArgs,
    wait: Option<Duration>,
    acquired: redlatch::Result<Option<G>>,
    busy: Option<String>,
    watchers: Vec<SettingsWatcher>,
) -> Result<Held<G>, Failure> {
    match acquired {
        Ok(Some(guard)) => Ok(Held {
            guard,
            _watchers: watchers,
            job: None,
        }),
        Ok(None) => {
            let waited = humantime::format_duration(wait.unwrap_or_default());
            Err(Failure::new(
                exit::NOT_ACQUIRED,
                format!(
                    "lock {} is held by {}; gave up after {waited}",
                    names::shown(&args.name),
                    busy.as_deref().unwrap_or("another owner")
                ),
            ))
        }
        Err(error) => Err(connect::call_failure(
            global,
            &format!("lock {}", names::shown(&args.name)),
            &error,
        )),
    }
}

/// What is left at once of `wait` counted from `started`: a zero wait stays
/// zero (one try), a wait that connecting used up leaves a millisecond (the
/// acquire then gives up at once, as a wait that ran out).
fn left_of(wait: Duration, started: Instant) -> Duration {
    if wait.is_zero() {
        return wait;
    }
    wait.saturating_sub(started.elapsed())
        .max(Duration::from_millis(1))
}

/// One acquire as `--wait` asks (`None`: until held; zero: one attempt):
/// `None` when another owner kept the lock.
async fn acquire<L: AcquireLock>(
    lock: &L,
    wait: Option<Duration>,
) -> redlatch::Result<Option<L::Guard>> {
    match lock.acquire_within(wait).await {
        Ok(guard) => Ok(Some(guard)),
        Err(redlatch::Error::Timeout { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Spawns the command and waits for it, stopping it if the lock is lost.
async fn supervise<G: ReleaseBeforeExit>(
    guard: G,
    job_owner: Option<&str>,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let name = &names::shown(&args.name);
    let program = &args.command[0];
    let mut command = tokio::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("REDLATCH_LOCK", name)
        .env("REDLATCH_TOKEN", guard.token().to_string());
    if let Some(owner) = job_owner {
        command.env(JOB_ENV, owner);
    }
    // The command gets the lock, not the credentials to Redis.
    for variable in secrets::CHILD_ENV_REMOVED {
        command.env_remove(variable);
    }
    let starting = job::configure(&mut command);
    // Created before the spawn so that no stop of the job goes unseen.
    let mut stops = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        .inspect_err(|error| tracing::debug!(%error, "job control not relayed"))
        .ok();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            release_quietly(guard, name).await;
            let code = if error.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
            return Err(Failure::new(
                code,
                format!("cannot run {}: {error}", program.to_string_lossy()),
            ));
        }
    };
    // The command leads a process group of its own (its pid is the group's id):
    // every signal below goes to the whole job, grandchildren included.
    let job = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(|pid| starting.started(pid));

    let lost = guard.lost();
    tokio::pin!(lost);
    let mut kill_at: Option<Instant> = None; // set once the lock is lost
    let mut killed = false;
    // The command's status, once reaped; after a loss we go on until the rest
    // of its group is gone too (or SIGKILLed).
    let mut status: Option<std::io::Result<std::process::ExitStatus>> = None;
    let waited = loop {
        tokio::select! {
            biased;
            waited = child.wait(), if status.is_none() => {
                if kill_at.is_none() || killed || job.as_ref().is_none_or(job::Job::is_gone) {
                    break waited;
                }
                status = Some(waited);
            }
            () = &mut lost, if kill_at.is_none() => {
                let reason = guard
                    .lost_reason()
                    .map_or_else(|| "expired, deleted or taken over".to_owned(), |reason| reason.to_string());
                eprintln!("{}", redact::redact(&format!(
                    "redlatch: lock {name} was lost while the command ran ({reason}); stopping the command and its process group (SIGTERM, then SIGKILL after {})",
                    humantime::format_duration(args.kill_after)
                )));
                job::signal(job.as_ref(), Signal::SIGTERM);
                kill_at = Some(Instant::now() + args.kill_after);
            }
            () = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() && !killed => {
                job::signal(job.as_ref(), Signal::SIGKILL);
                killed = true;
                if let Some(waited) = status.take() {
                    break waited;
                }
            }
            // The command is gone but not all of its group: look again soon
            // (no event tells when the last member of a group exits).
            () = tokio::time::sleep(job::GONE_POLL), if status.is_some() => {
                if job.as_ref().is_none_or(job::Job::is_gone)
                    && let Some(waited) = status.take()
                {
                    break waited;
                }
            }
            Some(()) = next_stop(stops.as_mut()), if status.is_none() => {
                if let Some(job) = &job {
                    job.relay_stop();
                }
            }
            received = signals.recv() => {
                // The job is in a process group of its own, so nothing sent to
                // ours (a terminal's Ctrl-C included) reaches it but through us.
                job::signal(job.as_ref(), received);
            }
        }
    };
    let status = match waited {
        Ok(status) => status,
        Err(error) => {
            release_quietly(guard, name).await;
            return Err(Failure::new(
                exit::SOFTWARE,
                format!("lost track of the command: {error}"),
            ));
        }
    };
    let code = exit::of_child(status);
    if kill_at.is_some() {
        // Already reported when it happened; this only stops the bookkeeping.
        let _ = guard.release_before_exit().await;
        return Ok(exit::LOST);
    }
    match guard.release_before_exit().await {
        Ok(()) => Ok(code),
        Err(redlatch::Error::NotHeld { .. }) => Err(Failure::new(
            exit::LOST,
            format!(
                "lock {name} was lost before the command finished (gone at release); the command exited with status {code}"
            ),
        )),
        Err(error) => {
            eprintln!(
                "{}",
                redact::redact(&format!(
                    "redlatch: could not release lock {name}: {error}; it frees itself within its lease"
                ))
            );
            Ok(code)
        }
    }
}

/// The next SIGCHLD, if they can be watched.
async fn next_stop(stops: Option<&mut tokio::signal::unix::Signal>) -> Option<()> {
    match stops {
        Some(stops) => stops.recv().await,
        None => std::future::pending().await,
    }
}

/// Releases a guard whose command never ran or was lost track of.
async fn release_quietly(guard: impl ReleaseBeforeExit, name: &str) {
    if let Err(error) = guard.release_before_exit().await {
        tracing::warn!(lock = name, %error, "release failed");
    }
}

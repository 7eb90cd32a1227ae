//! Client processes: the harness starts copies of itself (the hidden
//! `worker` subcommand), lets them connect, starts them all at one instant of
//! the monotonic clock, and collects their logs as one JSON line each.

use std::process::Stdio;

use clap::Args;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::clock::now_ns;
use crate::contender::{Kind, Locker};
use crate::workload::{self, ContendLog, CycleLog};

/// Margin between "every worker is ready" and the common start.
const START_MARGIN_NS: u64 = 50_000_000;
/// How long a worker's warm-up acquisition may take.
const WARM_UP_LIMIT_NS: u64 = 10_000_000_000;

/// What a worker process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Mode {
    /// Acquire → release on a key per task.
    Cycles,
    /// Acquire → release on one shared key.
    Contend,
}

/// Arguments of the hidden `worker` subcommand.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    #[arg(long, value_enum)]
    pub kind: Kind,
    #[arg(long, value_enum)]
    pub mode: Mode,
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub tasks: u32,
    /// Id of this process's first task (ids are unique across processes).
    #[arg(long)]
    pub first_task: u32,
    /// Key (contend) or key prefix (cycles).
    #[arg(long)]
    pub key: String,
    #[arg(long)]
    pub window_ns: u64,
}

/// A worker's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum WorkerOutput {
    Cycles(CycleLog),
    Contend(ContendLog),
}

/// Body of the `worker` subcommand: connect, say `ready`, read the start
/// instant from stdin, run, print the log.
pub async fn worker_main(args: WorkerArgs) -> Result<(), String> {
    let locker = Locker::connect(args.kind, std::slice::from_ref(&args.url)).await?;
    // One acquisition opens the connections before the clock starts.
    let warm_key = format!("{}:warm:{}", args.key, args.first_task);
    if let Some(held) = locker
        .acquire(&warm_key, now_ns() + WARM_UP_LIMIT_NS)
        .await?
    {
        locker.release(held).await?;
    }
    println!("ready");
    let mut line = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await
        .map_err(|error| format!("read start instant: {error}"))?;
    let start_ns: u64 = line
        .trim()
        .parse()
        .map_err(|error| format!("start instant {line:?}: {error}"))?;
    let deadline_ns = start_ns + args.window_ns;
    let output = match args.mode {
        Mode::Cycles => WorkerOutput::Cycles(
            workload::cycles(
                &locker,
                args.tasks,
                args.first_task,
                &args.key,
                start_ns,
                deadline_ns,
            )
            .await,
        ),
        Mode::Contend => WorkerOutput::Contend(
            workload::contend(
                &locker,
                args.tasks,
                args.first_task,
                &args.key,
                start_ns,
                deadline_ns,
            )
            .await,
        ),
    };
    let json = serde_json::to_string(&output).map_err(|error| error.to_string())?;
    println!("{json}");
    Ok(())
}

/// Runs `processes` workers of `tasks_each` tasks; returns their outputs
/// and the common window.
pub async fn run_workers(
    kind: Kind,
    mode: Mode,
    url: &str,
    processes: u32,
    tasks_each: u32,
    key: &str,
    window_ns: u64,
) -> Result<(Vec<WorkerOutput>, u64, u64), String> {
    let exe = std::env::current_exe().map_err(|error| format!("own executable: {error}"))?;
    let mut children: Vec<(Child, BufReader<tokio::process::ChildStdout>)> = Vec::new();
    for process in 0..processes {
        let mut child = Command::new(&exe)
            .arg("worker")
            .args(["--kind", kind_arg(kind), "--mode", mode_arg(mode)])
            .args(["--url", url, "--key", key])
            .args(["--tasks", &tasks_each.to_string()])
            .args(["--first-task", &(process * tasks_each).to_string()])
            .args(["--window-ns", &window_ns.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("start worker: {error}"))?;
        let stdout = child.stdout.take().ok_or("worker stdout")?;
        children.push((child, BufReader::new(stdout)));
    }
    for (_, stdout) in &mut children {
        let line = read_line(stdout).await?;
        if line.trim() != "ready" {
            return Err(format!("worker said {line:?} instead of ready"));
        }
    }
    let start_ns = now_ns() + START_MARGIN_NS;
    for (child, _) in &mut children {
        let stdin = child.stdin.as_mut().ok_or("worker stdin")?;
        stdin
            .write_all(format!("{start_ns}\n").as_bytes())
            .await
            .map_err(|error| format!("start worker: {error}"))?;
    }
    let mut outputs = Vec::new();
    for (mut child, mut stdout) in children {
        let line = read_line(&mut stdout).await?;
        outputs.push(
            serde_json::from_str(&line)
                .map_err(|error| format!("worker output {line:.80}: {error}"))?,
        );
        let _ = child.wait().await;
    }
    Ok((outputs, start_ns, start_ns + window_ns))
}

async fn read_line(stdout: &mut BufReader<tokio::process::ChildStdout>) -> Result<String, String> {
    let mut line = String::new();
    let read = stdout
        .read_line(&mut line)
        .await
        .map_err(|error| format!("read worker: {error}"))?;
    if read == 0 {
        return Err("worker exited early (see its stderr above)".to_owned());
    }
    Ok(line)
}

fn kind_arg(kind: Kind) -> &'static str {
    match kind {
        Kind::Redlatch => "redlatch",
        Kind::RedlatchEvalsha => "redlatch-evalsha",
        Kind::Rslock => "rslock",
        Kind::Redlock => "redlock",
        Kind::Raw => "raw",
        Kind::Fair => "fair",
        Kind::Token => "token",
        Kind::Pings => "pings",
    }
}

fn mode_arg(mode: Mode) -> &'static str {
    match mode {
        Mode::Cycles => "cycles",
        Mode::Contend => "contend",
    }
}

/// Sum of the workers' cycle logs.
pub fn merge_cycles(outputs: Vec<WorkerOutput>) -> Result<CycleLog, String> {
    let mut total = CycleLog::default();
    for output in outputs {
        match output {
            WorkerOutput::Cycles(log) => {
                total.cycles += log.cycles;
                total.allocations += log.allocations;
                total.errors.merge(log.errors);
            }
            WorkerOutput::Contend(_) => return Err("worker ran the wrong mode".to_owned()),
        }
    }
    Ok(total)
}

/// Union of the workers' contention logs.
pub fn merge_contend(outputs: Vec<WorkerOutput>) -> Result<ContendLog, String> {
    let mut total = ContendLog::default();
    for output in outputs {
        match output {
            WorkerOutput::Contend(log) => total.merge(log),
            WorkerOutput::Cycles(_) => return Err("worker ran the wrong mode".to_owned()),
        }
    }
    Ok(total)
}

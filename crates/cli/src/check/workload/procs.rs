//! The worker processes of a run: the same binary re-executed with the
//! hidden `__check-worker` command.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::check::event::{Event, What, read_events};
use crate::check::points::Point;
use crate::check::recipes::RecipeName;

/// What every worker of a run is started with.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The binary to run (this one).
    pub program: PathBuf,
    /// The recipe.
    pub recipe: RecipeName,
    /// The lock servers' URLs (a worker may be given its own way to them).
    pub lock_urls: Vec<String>,
    /// The store's URL.
    pub resource_url: String,
    /// The lease in milliseconds.
    pub lease_ms: u64,
    /// Where workers stop themselves when armed.
    pub point: Option<Point>,
    /// The run's temp dir (event files, workers' stderr).
    pub dir: PathBuf,
    /// The master's name when the lock URLs are Sentinels'.
    pub sentinel_master: Option<String>,
    /// Longest wait inside a section, in milliseconds.
    pub think_ms: u64,
}

/// One worker process.
#[derive(Debug)]
pub struct Worker {
    /// Its number in events and reports.
    pub id: u32,
    child: Child,
    events: PathBuf,
    /// It stopped itself and the lab has acted on it (paused).
    pub held_by_lab: bool,
    /// It has exited or been killed.
    pub gone: bool,
}

impl Spec {
    /// Starts worker `id`, reaching the lock servers at `lock_urls`.
    pub fn spawn(&self, id: u32, lock_urls: &[String]) -> std::io::Result<Worker> {
        let events = self.dir.join(format!("worker-{id}.jsonl"));
        let stderr = std::fs::File::create(self.dir.join(format!("worker-{id}.stderr")))?;
        let mut command = Command::new(&self.program);
        command
            .arg("__check-worker")
            .arg("--recipe")
            .arg(self.recipe.name())
            .args(lock_urls.iter().flat_map(|url| ["--lock-url", url]))
            .arg("--resource-url")
            .arg(&self.resource_url)
            .arg("--id")
            .arg(id.to_string())
            .arg("--lease-ms")
            .arg(self.lease_ms.to_string())
            .arg("--think-ms")
            .arg(self.think_ms.to_string())
            .arg("--events")
            .arg(&events)
            .arg("--lab-pid")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Workers log only what the lab needs; library warnings stay quiet.
            .env("RUST_LOG", "error");
        if let Some(point) = self.point {
            command.arg("--point").arg(point.name());
        }
        if let Some(master) = &self.sentinel_master {
            command.arg("--sentinel-master").arg(master);
        }
        Ok(Worker {
            id,
            child: command.spawn()?,
            events,
            held_by_lab: false,
            gone: false,
        })
    }
}

impl Worker {
    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX))
    }

    /// Sends `signal` unless the process is gone.
    pub fn signal(&mut self, signal: Signal) {
        if !self.gone && !self.exited() {
            let _ = kill(self.pid(), signal);
        }
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if !self.gone {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.gone = true;
        }
    }

    /// True once the process has exited (reaped here).
    pub fn exited(&mut self) -> bool {
        if !self.gone && matches!(self.child.try_wait(), Ok(Some(_))) {
            self.gone = true;
        }
        self.gone
    }

    /// True while the process is stopped (SIGSTOP).
    pub fn is_stopped(&self) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return false;
        };
        // The state letter follows the command name, which is in parentheses.
        matches!(
            text.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next()),
            Some('T' | 't')
        )
    }

    /// Whether it has logged `ready`.
    pub fn is_ready(&self) -> bool {
        self.events().iter().any(|event| event.what == What::Ready)
    }

    /// Every event it logged.
    pub fn events(&self) -> Vec<Event> {
        read_events(&self.events).unwrap_or_default()
    }

    /// The end of its stderr, to explain a worker that died.
    pub fn stderr_tail(&self, dir: &Path) -> String {
        let text = std::fs::read_to_string(dir.join(format!("worker-{}.stderr", self.id)))
            .unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(3).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // A stopped worker would never die of SIGTERM; SIGKILL always works.
        self.kill();
    }
}

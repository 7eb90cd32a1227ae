//! Helpers for the end-to-end tests: a throwaway redis-server and temp dir
//! per test, and `redlatch` processes that are killed (with everything they
//! started) when a test ends, passed or failed.
#![allow(dead_code)]

use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use testkit::RedisServer;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_redlatch");

/// One test's world: its own Redis and its own directory.
pub struct World {
    pub server: RedisServer,
    pub dir: TempDir,
    spawned: AtomicUsize,
}

impl World {
    pub fn new() -> World {
        World {
            server: RedisServer::start().expect("start redis-server (is it installed?)"),
            dir: tempfile::tempdir().expect("temp dir"),
            spawned: AtomicUsize::new(0),
        }
    }

    /// A path in the test's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `redlatch --redis URL ARGS...`, stdin closed.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("--redis")
            .arg(self.server.url())
            .args(args)
            .env_remove("REDIS_URL")
            // A test run inside a `redlatch run` job must not make every run one party.
            .env_remove("REDLATCH_JOB")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        default_signals(&mut command);
        command
    }

    /// Runs to completion and collects the output: for commands that start
    /// no long-lived process (status, list, unlock, quick runs).
    pub fn output(&self, args: &[&str]) -> Output {
        let output = self.command(args).output().expect("run redlatch");
        eprintln!(
            "redlatch {args:?} -> {:?}\n  stdout: {}\n  stderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim_end(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
        output
    }

    /// Starts `redlatch ARGS...` in a process group of its own, stdout and
    /// stderr to files (a pipe would be held open by orphaned grandchildren).
    pub fn spawn(&self, args: &[&str]) -> Running {
        let n = self.spawned.fetch_add(1, Ordering::Relaxed);
        let stdout = self.path(&format!("redlatch-{n}.out"));
        let stderr = self.path(&format!("redlatch-{n}.err"));
        let child = self
            .command(args)
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .process_group(0)
            .spawn()
            .expect("spawn redlatch");
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// A synchronous connection for looking at what redlatch wrote.
    pub fn redis(&self) -> redis::Connection {
        self.server.conn()
    }

    /// Whether the lock's key exists.
    pub fn exists(&self, conn: &mut redis::Connection, key: &str) -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(conn)
            .expect("EXISTS")
            == 1
    }

    /// Waits until the lock's key exists (the lock is held).
    pub fn wait_held(&self, key: &str, limit: Duration) {
        let mut conn = self.redis();
        assert!(
            eventually(limit, || self.exists(&mut conn, key)),
            "lock {key} was not taken within {limit:?}"
        );
    }
}

/// A `redlatch` process; dropping it SIGKILLs its whole process group and
/// reaps it. The command `run` started is in a group of its own, and dies
/// with redlatch (its death signal and reaper).
pub struct Running {
    pub child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to redlatch alone.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a pid we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0, "kill");
    }

    /// Waits for redlatch to exit; panics (and the drop cleans up) after `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        self.try_wait_for(limit).unwrap_or_else(|| {
            panic!(
                "redlatch still running after {limit:?}; stderr: {}",
                self.stderr()
            )
        })
    }

    /// Waits up to `limit` for redlatch to exit.
    pub fn try_wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            sleep(Duration::from_millis(5));
        }
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group we created at spawn.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The exit code, or 128+N for a signal (as a shell shows it).
pub fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Polls `check` every 10 ms until true or `limit` passes; whether it became true.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(10));
    }
}

/// Waits for a file the command writes.
pub fn wait_file(path: &Path, limit: Duration) {
    assert!(
        eventually(limit, || path.exists()),
        "{} did not appear within {limit:?}",
        path.display()
    );
}

/// Whether process `pid` is still alive (not reaped, not a zombie we can see).
pub fn alive(pid: i32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Field 3, after the parenthesised command name, is the state; Z = zombie.
    match stat.rsplit_once(')') {
        Some((_, rest)) => !rest.trim_start().starts_with('Z'),
        None => false,
    }
}

/// Kills a process the command left behind (its pid in `pid_file`) when dropped.
pub struct Orphan(pub PathBuf);

impl Drop for Orphan {
    fn drop(&mut self) {
        if let Ok(text) = fs::read_to_string(&self.0)
            && let Ok(pid) = text.trim().parse::<i32>()
        {
            // SAFETY: kill(2); at worst the pid is gone already.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Single-quotes a path for `sh -c` scripts.
pub fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Gives the spawned process the default action for the job-control
/// signals. A test run started in the background by a non-interactive
/// shell (or under `nohup`) inherits SIGINT, SIGQUIT or SIGHUP ignored, and
/// an ignored signal stays ignored across exec, for redlatch as for its
/// command (`sh` cannot even trap it): the tests of what a signal does
/// would then test the launcher, not redlatch.
pub fn default_signals(command: &mut Command) {
    // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        command.pre_exec(|| {
            for signal in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGHUP,
                libc::SIGTERM,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
            ] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

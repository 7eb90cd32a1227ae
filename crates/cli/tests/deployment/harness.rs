//! A deployment under test (its servers live as long as it does) and
//! `redlatch` processes run against it with its flags.

use std::any::Any;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{BIN, code, eventually};

/// Servers and the global flags that name them.
pub struct Deployment {
    pub flags: Vec<String>,
    /// What to keep alive: the servers.
    _servers: Box<dyn Any>,
}

impl Deployment {
    pub fn new(flags: Vec<String>, servers: impl Any) -> Deployment {
        Deployment {
            flags,
            _servers: Box::new(servers),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(&self.flags)
            .args(args)
            .env_remove("REDIS_URL")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }

    /// Runs `redlatch FLAGS ARGS` to completion.
    pub fn output(&self, args: &[&str]) -> Output {
        let output = self.command(args).output().expect("run redlatch");
        eprintln!(
            "redlatch {:?} {args:?} -> {:?}\n  stdout: {}\n  stderr: {}",
            self.flags,
            output.status,
            String::from_utf8_lossy(&output.stdout).trim_end(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
        output
    }

    /// `ARGS --json`, parsed; panics unless it exits 0.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let output = self.output(&with_json);
        assert_eq!(code(output.status), 0, "{args:?}");
        serde_json::from_slice(&output.stdout).expect("JSON")
    }

    /// Starts `redlatch FLAGS ARGS` in its own process group, killed on drop.
    pub fn spawn(&self, args: &[&str]) -> Spawned {
        let child = self
            .command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn redlatch");
        Spawned(child)
    }

    /// Waits until `status NAME` says the lock is held.
    pub fn wait_held(&self, name: &str) -> Value {
        let mut last = Value::Null;
        let held = eventually(Duration::from_secs(20), || {
            last = self.json(&["status", name]);
            last["held"] == true
        });
        assert!(held, "{name} not held: {last}");
        last
    }
}

/// A process group killed when the test is done with it.
pub struct Spawned(Child);

impl Spawned {
    /// Waits up to `limit` for it to exit; its exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let mut status = None;
        eventually(limit, || {
            status = self.0.try_wait().ok().flatten();
            status.is_some()
        });
        status.map(code)
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group we created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// `--NAME VALUE` for each value.
pub fn repeated(name: &str, values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|value| [format!("--{name}"), value.clone()])
        .collect()
}

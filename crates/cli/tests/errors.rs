//! Failures before the command runs: each one line on stderr and its own exit status.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, World, code};

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Nothing listens on the URL: exit 69, one line naming it (password hidden).
#[test]
fn unreachable_redis_exits_69() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let output = Command::new(BIN)
        .args([
            "--redis",
            "redis://app:s3cret@127.0.0.1:1",
            "run",
            "x",
            "--",
            "touch",
        ])
        .arg(&marker)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(code(output.status), 69);
    let stderr = stderr_of(&output);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("redlatch: cannot reach Redis at redis://app:***@127.0.0.1:1: "),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"));
    assert!(!marker.exists());
}

/// Usage errors (bad duration, missing `--`, unknown option) exit 64.
#[test]
fn usage_errors_exit_64() {
    for args in [
        &["run", "x", "--lease", "banana", "--", "true"][..],
        &["run", "x", "--lease", "5ms", "--", "true"],
        &["run", "x", "--wait", "5 parsecs", "--", "true"],
        &["run", "x", "true"],
        &["status"],
        &["frobnicate"],
    ] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(code(output.status), 64, "{args:?}: {}", stderr_of(&output));
        assert!(stderr_of(&output).starts_with("error: "), "{args:?}");
    }
}

/// `--help` documents the exit statuses and exits 0.
#[test]
fn help_lists_exit_statuses() {
    let output = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(code(output.status), 0);
    let help = String::from_utf8_lossy(&output.stdout);
    for line in ["Exit status:", "75 ", "79 ", "128+N"] {
        assert!(help.contains(line), "no {line:?} in --help");
    }
}

/// A command that does not exist: exit 127, and the lock is not left held.
#[test]
fn missing_command_exits_127_and_releases() {
    let world = World::new();
    let output = world.output(&["run", "ghost", "--", "/nonexistent/command"]);
    assert_eq!(code(output.status), 127);
    assert!(stderr_of(&output).starts_with("redlatch: cannot run /nonexistent/command: "));
    assert!(!world.exists(&mut world.redis(), "ghost"));
}

/// stdin, stdout and the exit status pass through.
#[test]
fn stdio_and_status_pass_through() {
    let world = World::new();
    let mut command = world.command(&["run", "pipe", "--", "sh", "-c", "tr a-z A-Z; exit 42"]);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(code(output.status), 42);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "HELLO\n");
}

/// Runs `redlatch ARGS...` (no `--redis` added) and collects its exit
/// status and stderr; fails the test if it is still running after `limit`.
fn finishes_within(limit: Duration, args: &[&str]) -> (i32, String) {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            // SAFETY: kill(2) on the process group we created at spawn.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "redlatch {args:?} still running after {limit:?}; stderr: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    eprintln!(
        "redlatch {args:?} -> {status:?} after {:?}: {stderr}",
        started.elapsed()
    );
    (code(status), stderr)
}

/// Writes `text` to `name` in `dir`; the path as a string.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A server that accepts connections and never answers (SIGSTOP): every
/// command gives up within `--wait` (run) or the connect timeout, exit 69,
/// naming the limit that ran out.
#[test]
fn a_frozen_server_fails_within_the_limit_it_names() {
    let world = World::new();
    world.server.pause().unwrap();
    let url = world.server.url();
    let (status, stderr) = finishes_within(
        Duration::from_secs(5),
        &["--redis", &url, "run", "x", "--wait", "1s", "--", "true"],
    );
    assert_eq!(status, 69, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "redlatch: could not connect to {url} within 1s (--wait)"
        )),
        "{stderr}"
    );

    // Without --wait: the connect timeout, from the settings file.
    let config = write(
        world.dir.path(),
        "fast.toml",
        "[connection]\nconnect_timeout = \"1s\"\n",
    );
    for command in [
        &["status", "x"][..],
        &["list"],
        &["unlock", "x", "--force"],
        &["run", "x", "--", "true"],
    ] {
        let mut args = vec!["--redis", &url, "--config", &config];
        args.extend(command);
        let (status, stderr) = finishes_within(Duration::from_secs(5), &args);
        assert_eq!(status, 69, "{command:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "could not connect to {url} within 1s (connect timeout 1s)"
            )),
            "{command:?}: {stderr}"
        );
    }
    world.server.resume().unwrap();
}

/// `rediss://` to a port without TLS: the handshake is never answered;
/// the wait runs out with a hint about TLS.
#[test]
fn rediss_to_a_plain_port_fails_within_the_wait() {
    let world = World::new();
    let url = format!("rediss://127.0.0.1:{}", world.server.port());
    let (status, stderr) = finishes_within(
        Duration::from_secs(5),
        &["--redis", &url, "run", "x", "--wait", "1s", "--", "true"],
    );
    assert_eq!(status, 69, "{stderr}");
    assert!(
        stderr.contains(&format!("{url} within 1s (--wait)")),
        "{stderr}"
    );
    assert!(stderr.contains("does that port speak TLS?"), "{stderr}");
}

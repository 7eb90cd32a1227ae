//! Failures before the command runs: each one line on stderr and its own exit status.

mod common;

use std::process::Command;

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

//! `--redis` given several times: `run` and `status` use Redlock over those
//! masters. Each test has its own masters: the world's server plus others.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::{World, code, q, wait_file};
use testkit::Servers;

/// `--redis URL` for each extra master.
fn redis_args(extra: &Servers) -> Vec<String> {
    extra
        .urls()
        .into_iter()
        .flat_map(|url| ["--redis".to_owned(), url])
        .collect()
}

fn with<'a>(args: &'a [String], rest: &[&'a str]) -> Vec<&'a str> {
    args.iter()
        .map(String::as_str)
        .chain(rest.iter().copied())
        .collect()
}

fn exists(server: &testkit::RedisServer, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(&mut server.conn())
        .expect("EXISTS")
        == 1
}

/// The lock is on every master while the command runs, the token reaches
/// the command, and everything is released when it exits.
#[test]
fn run_over_three_masters_holds_the_lock_on_each_and_releases_it() {
    let world = World::new();
    let extra = Servers::start(2).expect("masters");
    let redis = redis_args(&extra);
    let token = world.path("token");
    let script = format!("echo \"$REDLATCH_TOKEN\" > {}; sleep 1", q(&token));
    let mut run = world.spawn(&with(&redis, &["run", "rl:cli", "--", "sh", "-c", &script]));
    wait_file(&token, Duration::from_secs(10));
    let everywhere = common::eventually(Duration::from_secs(5), || {
        exists(&world.server, "rl:cli") && extra.iter().all(|master| exists(master, "rl:cli"))
    });
    assert!(everywhere, "held on every master");
    let status = run.wait(Duration::from_secs(20));
    assert_eq!(code(status), 0, "stderr: {}", run.stderr());
    let token: u64 = fs::read_to_string(&token).unwrap().trim().parse().unwrap();
    assert!(token >= 1);
    assert!(!exists(&world.server, "rl:cli"));
    for master in &extra {
        assert!(!exists(master, "rl:cli"), "released on every master");
    }
}

/// `status` shows the majority holder and each master's view, also with
/// one master down.
#[test]
fn status_over_three_masters_shows_the_majority_holder_and_each_master() {
    let world = World::new();
    let mut extra = Servers::start(2).expect("masters");
    let redis = redis_args(&extra);
    let _holder = world.spawn(&with(&redis, &["run", "rl:status", "--", "sleep", "30"]));
    world.wait_held("rl:status", Duration::from_secs(10));

    let output = world.output(&with(&redis, &["--json", "status", "rl:status"]));
    assert_eq!(code(output.status), 0);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["held"], true);
    assert_eq!(json["answered"], 3);
    assert_eq!(json["quorum"], 2);
    assert_eq!(json["nodes"].as_array().unwrap().len(), 3);
    assert!(json["holder"].as_str().is_some());

    extra[1].kill().unwrap();
    let output = world.output(&with(&redis, &["status", "rl:status"]));
    assert_eq!(code(output.status), 0);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("held     yes"), "{text}");
    assert!(text.contains("answered 2 of 3"), "{text}");
    assert!(
        text.contains(&extra[1].url()),
        "the dead master is listed: {text}"
    );
}

/// With a majority of the masters down, `run` exits 69 naming them, and the
/// command does not run.
#[test]
fn run_with_a_majority_of_masters_down_exits_69_naming_them() {
    let world = World::new();
    let mut extra = Servers::start(2).expect("masters");
    let redis = redis_args(&extra);
    let dead: Vec<String> = extra.urls();
    for master in &mut extra {
        master.kill().unwrap();
    }
    let marker = world.path("marker");
    let output = world.output(&with(
        &redis,
        &[
            "run",
            "rl:down",
            "--wait",
            "5s",
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
    ));
    assert_eq!(code(output.status), 69);
    assert!(!marker.exists(), "the command ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for url in &dead {
        assert!(stderr.contains(url.as_str()), "{stderr}");
    }
}

/// Commands without Redlock support refuse several `--redis` (exit 64).
#[test]
fn list_and_unlock_take_one_redis() {
    let world = World::new();
    let extra = Servers::start(1).expect("master");
    let redis = redis_args(&extra);
    let output = world.output(&with(&redis, &["list"]));
    assert_eq!(code(output.status), 64);
    let output = world.output(&with(&redis, &["unlock", "x", "--force"]));
    assert_eq!(code(output.status), 64);
    let output = world.output(&with(&redis, &["run", "x", "--owner", "me", "--", "true"]));
    assert_eq!(code(output.status), 64);
}

/// Two of three masters die under a running command: renewals no longer
/// reach a majority, the lock is lost within the lease, the command is
/// stopped, exit 79.
#[test]
fn run_over_three_masters_stops_the_command_when_the_majority_is_gone() {
    let world = World::new();
    let mut extra = Servers::start(2).expect("masters");
    let redis = redis_args(&extra);
    let started = world.path("started");
    let script = format!("touch {}; exec sleep 30", q(&started));
    let mut run = world.spawn(&with(
        &redis,
        &[
            "run",
            "rl:doomed",
            "--lease",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    ));
    wait_file(&started, Duration::from_secs(10));
    for master in &mut extra {
        master.kill().unwrap();
    }
    let killed = Instant::now();
    let status = run.wait(Duration::from_secs(15));
    eprintln!("redlatch exited {:?} after the kills", killed.elapsed());
    assert_eq!(code(status), 79, "stderr: {}", run.stderr());
    assert!(
        run.stderr()
            .contains("lock rl:doomed was lost while the command ran"),
        "{}",
        run.stderr()
    );
}

/// One master of three frozen (SIGSTOP): `run --wait 1s` gives up on that
/// master after the wait and runs the command on the majority, instead of
/// waiting out the connect timeout and its retries (~41 s).
#[test]
fn a_frozen_minority_master_does_not_hold_up_the_run() {
    let world = World::new();
    let extra = Servers::start(2).expect("two more masters");
    extra.iter().next().unwrap().pause().unwrap();
    let args = redis_args(&extra);
    let marker = world.path("ran");
    let touch = format!("touch {}", q(&marker));
    let mut running = world.spawn(&with(
        &args,
        &[
            "run",
            "frozen-minority",
            "--wait",
            "1s",
            "--",
            "sh",
            "-c",
            &touch,
        ],
    ));
    let status = running.wait(Duration::from_secs(8));
    assert_eq!(code(status), 0, "stderr: {}", running.stderr());
    assert!(marker.exists(), "the command did not run");
    extra.iter().next().unwrap().resume().unwrap();
}

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
    assert!(json["holders"][0]["owner"].as_str().is_some(), "{json}");

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

/// `--owner` has no meaning for Redlock's per-acquisition owners (exit 64).
#[test]
fn run_with_an_owner_takes_one_redis() {
    let world = World::new();
    let extra = Servers::start(1).expect("master");
    let redis = redis_args(&extra);
    let output = world.output(&with(&redis, &["run", "x", "--owner", "me", "--", "true"]));
    assert_eq!(code(output.status), 64);
}

fn json_of(output: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        code(output.status),
        0,
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// The keys of a JSON object, sorted.
fn keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// Over five masters, `status --json`, `list --json` and `top --json` give
/// one lock object: the majority's holder as `holders` objects, `ttl_ms`,
/// `quorum`, `answered` and each master's own view; and `list` also shows
/// a lock held on a minority of the masters, as not held.
#[test]
fn status_list_and_top_give_one_json_shape_over_five_masters() {
    let world = World::new();
    let extra = Servers::start(4).expect("masters");
    let redis = redis_args(&extra);
    let _holder = world.spawn(&with(&redis, &["run", "rl:shape", "--", "sleep", "60"]));
    let everywhere = common::eventually(Duration::from_secs(10), || {
        exists(&world.server, "rl:shape") && extra.iter().all(|master| exists(master, "rl:shape"))
    });
    assert!(everywhere, "held on every master");
    // A leftover on two of five masters: no majority.
    for master in extra.iter().take(2) {
        let _: i64 = redis::cmd("HSET")
            .arg("rl:stray")
            .arg("0b7c5d3e-4f7a-4c1e-9a55-2f0d6b3f2a11:7")
            .arg(1)
            .query(&mut master.conn())
            .unwrap();
    }

    let status = json_of(&world.output(&with(&redis, &["--json", "status", "rl:shape"])));
    let listed = json_of(&world.output(&with(&redis, &["--json", "list"])));
    let top = json_of(&world.output(&with(&redis, &["--json", "top", "--once"])));
    let listed = listed.as_array().expect("an array");
    let names: Vec<&str> = listed
        .iter()
        .map(|lock| lock["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["rl:shape", "rl:stray"]);
    let from_top = top["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|lock| lock["name"] == "rl:shape")
        .expect("rl:shape in top")
        .clone();

    let shape = [
        "answered", "held", "holders", "name", "nodes", "quorum", "token", "ttl_ms", "waiting",
    ];
    assert_eq!(keys(&status), shape);
    assert_eq!(keys(&listed[0]), shape);
    let top_keys: Vec<String> = keys(&from_top)
        .into_iter()
        .filter(|key| shape.contains(&key.as_str()))
        .collect();
    assert_eq!(top_keys, shape, "top's lock object: {from_top}");
    for lock in [&status, &listed[0], &from_top] {
        assert_eq!(lock["held"], true, "{lock}");
        assert_eq!(lock["quorum"], 3);
        assert_eq!(lock["answered"], 5);
        let holders = lock["holders"].as_array().expect("holders");
        assert_eq!(holders.len(), 1, "{lock}");
        assert!(holders[0]["owner"].as_str().is_some() && holders[0]["count"] == 1);
        let ttl = lock["ttl_ms"].as_u64().expect("ttl_ms in ms");
        assert!(ttl > 1_000 && ttl <= 30_000, "{ttl}");
        let nodes = lock["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.len(), 5);
        for node in nodes {
            assert_eq!(node["status"]["held"], true, "{node}");
            assert_eq!(node["status"]["holders"], lock["holders"], "{node}");
        }
    }
    assert_eq!(status["holders"], listed[0]["holders"]);

    let stray = &listed[1];
    assert_eq!(stray["held"], false, "{stray}");
    assert_eq!(stray["holders"], serde_json::json!([]));
    let holding = stray["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|node| node["status"]["held"] == true)
        .count();
    assert_eq!(holding, 2, "{stray}");
    let text = world.output(&with(&redis, &["list"]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("rl:shape  held by ") && text.contains(" on 5 of 5 masters"),
        "{text}"
    );
    assert!(text.contains("rl:stray  no majority"), "{text}");

    // A run that gives up names the majority's holder (its owner: Redlock
    // holds publish no identity) and the lease it has left.
    let busy = world.output(&with(
        &redis,
        &["run", "rl:shape", "--wait", "0", "--", "true"],
    ));
    assert_eq!(code(busy.status), 75);
    let message = String::from_utf8_lossy(&busy.stderr);
    let owner = status["holders"][0]["owner"].as_str().unwrap();
    let (client, own) = owner.split_once(':').unwrap();
    assert!(
        message.starts_with(&format!(
            "redlatch: lock rl:shape is held by {own} {client}, for "
        )) && message.ends_with(" more; gave up after 0s\n"),
        "{message}"
    );
}

/// `unlock --force` over five masters deletes the lock on every master that
/// answers and reports each master; one master down is named, and the exit
/// is 0 while a majority answered; with a majority down it is 69.
#[test]
fn unlock_force_over_five_masters_deletes_everywhere_and_reports_each_master() {
    let world = World::new();
    let mut extra = Servers::start(4).expect("masters");
    let redis = redis_args(&extra);
    let mut holder = world.spawn(&with(&redis, &["run", "rl:stuck", "--", "sleep", "60"]));
    let everywhere = common::eventually(Duration::from_secs(10), || {
        exists(&world.server, "rl:stuck") && extra.iter().all(|master| exists(master, "rl:stuck"))
    });
    assert!(everywhere, "held on every master");
    let dead = extra[3].url();
    extra[3].kill().unwrap();

    let report =
        json_of(&world.output(&with(&redis, &["--json", "unlock", "rl:stuck", "--force"])));
    assert_eq!(report["name"], "rl:stuck");
    assert_eq!(report["deleted"], true);
    assert_eq!(report["answered"], 4);
    let nodes = report["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 5);
    assert_eq!(
        nodes.iter().filter(|node| node["deleted"] == true).count(),
        4,
        "{report}"
    );
    let failed: Vec<&serde_json::Value> = nodes
        .iter()
        .filter(|node| node["error"].is_string())
        .collect();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0]["node"], dead.as_str());
    assert!(!exists(&world.server, "rl:stuck"));
    for master in extra.iter().take(3) {
        assert!(!exists(master, "rl:stuck"), "deleted on every master");
    }
    // The holder learns it lost the lock.
    assert_eq!(code(holder.wait(Duration::from_secs(30))), 79);

    let again = world.output(&with(&redis, &["unlock", "rl:stuck", "--force"]));
    assert_eq!(code(again.status), 0);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("not held there"), "{text}");
    assert!(text.contains(&format!("master {dead}: error")), "{text}");

    extra[2].kill().unwrap();
    extra[1].kill().unwrap();
    let refused = world.output(&with(&redis, &["unlock", "rl:stuck", "--force"]));
    assert_eq!(code(refused.status), 69);
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

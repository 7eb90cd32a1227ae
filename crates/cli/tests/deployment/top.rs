//! `redlatch top` through its `--json` form: a contended lock seen with its
//! holder, waiters, lease and token; acquisitions per second from a lock
//! changing hands; every master of a cluster scanned; on a cluster, a
//! holder that waits for a tagged lock shown waiting for it.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::{Cluster, RedisServer};

use crate::common::eventually;
use crate::harness::{Deployment, repeated};

/// The row of `name` in one `top --json` refresh.
fn row<'a>(snapshot: &'a Value, name: &str) -> Option<&'a Value> {
    snapshot["locks"]
        .as_array()?
        .iter()
        .find(|lock| lock["name"] == name)
}

#[test]
fn a_contended_lock_shows_its_holder_waiters_lease_and_token() {
    let server = RedisServer::start().expect("redis-server");
    let deployment = Deployment::new(vec!["--redis".into(), server.url()], ());
    let _holder = deployment.spawn(&["run", "contended", "--", "sleep", "60"]);
    deployment.wait_held("contended");
    let _waiters: Vec<_> = (0..2)
        .map(|_| deployment.spawn(&["run", "contended", "--wait", "60s", "--", "true"]))
        .collect();
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(20), || {
        last = deployment.json(&["top", "--once", "--prefix", "contended"]);
        row(&last, "contended").is_some_and(|lock| lock["waiters"] == 2)
    });
    assert!(seen, "two waiters never shown: {last}");
    assert!(last["at"].as_u64().is_some_and(|at| at > 0), "{last}");
    let lock = row(&last, "contended").expect("the lock");
    assert_eq!(lock["kind"], "lock");
    assert_eq!(lock["holders"].as_array().map(Vec::len), Some(1), "{lock}");
    assert!(lock["ttl_ms"].as_u64().is_some_and(|ttl| ttl > 0), "{lock}");
    assert!(
        lock["token"].as_u64().is_some_and(|token| token >= 1),
        "{lock}"
    );
    // The first refresh of a lock has no rate yet.
    assert!(lock["acquisitions_per_s"].is_null(), "{lock}");
}

#[test]
fn the_json_stream_shows_a_lock_changing_hands_and_how_long_it_was_waited_for() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    // Two tasks take turns on `churn`, holding it 50 ms each time, so one
    // always waits and the lock is nearly always held when top looks.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = runtime
        .block_on(redlatch::Client::connect(&url))
        .expect("client");
    for _ in 0..2 {
        let client = client.clone();
        runtime.spawn(async move {
            loop {
                if let Ok(guard) = client.lock("churn").acquire().await {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = guard.release().await;
                }
            }
        });
    }
    let deployment = Deployment::new(vec!["--redis".into(), url], ());
    let mut top = deployment
        .command(&["top", "--json", "--interval", "200ms", "--prefix", "churn"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("top");
    let lines = BufReader::new(top.stdout.take().expect("stdout")).lines();
    let started = Instant::now();
    let mut rates = Vec::new();
    let mut longest_wait = 0;
    for line in lines {
        let snapshot: Value = serde_json::from_str(&line.expect("a line")).expect("JSON");
        if let Some(lock) = row(&snapshot, "churn") {
            rates.extend(lock["acquisitions_per_s"].as_f64());
            longest_wait = longest_wait.max(lock["longest_wait_ms"].as_u64().unwrap_or(0));
        }
        if rates.len() >= 5 || started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let _ = top.kill();
    let _ = top.wait();
    assert!(rates.len() >= 5, "too few refreshes with a rate: {rates:?}");
    // About 20 acquisitions per second; generous bounds, this is not a benchmark.
    let best = rates.iter().copied().fold(0.0, f64::max);
    assert!(best > 2.0, "the lock changed hands but top saw {rates:?}");
    assert!(
        longest_wait >= 200,
        "a waiter was always there: {longest_wait} ms"
    );
    drop(runtime);
}

#[test]
fn on_a_cluster_every_master_is_scanned_and_waiters_are_counted() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    // Names whose keys live on three different masters.
    let mut names: Vec<String> = Vec::new();
    let mut masters = Vec::new();
    for candidate in (0..200).map(|n| format!("spread-{n}")) {
        let master = cluster.master_of(&candidate).expect("slot owner");
        if !masters.contains(&master) {
            masters.push(master);
            names.push(candidate);
        }
        if names.len() == 3 {
            break;
        }
    }
    assert_eq!(names.len(), 3, "no names on three masters");
    let deployment = Deployment::new(repeated("redis-cluster", &cluster.urls()[..1]), ());
    let _holders: Vec<_> = names
        .iter()
        .map(|name| deployment.spawn(&["run", name, "--", "sleep", "60"]))
        .collect();
    for name in &names {
        deployment.wait_held(name);
    }
    let _waiter = deployment.spawn(&["run", &names[0], "--wait", "60s", "--", "true"]);
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(20), || {
        last = deployment.json(&["top", "--once", "--sort", "waiters", "--prefix", "spread-"]);
        names.iter().all(|name| row(&last, name).is_some())
            && row(&last, &names[0]).is_some_and(|lock| lock["waiters"] == 1)
    });
    assert!(
        seen,
        "expected {names:?} with one waiter on the first: {last}"
    );
    // Most waiters first.
    assert_eq!(last["locks"][0]["name"], names[0].as_str(), "{last}");
    drop(cluster);
}

/// On a cluster, the waits read are the holders' own, beside each lock
/// with a hash tag (`redlatch_wait:{tag}:PARTY`): a job holding `{t}a`
/// whose nested run waits for `{t}b` is shown waiting for it.
#[test]
fn on_a_cluster_a_holder_waiting_for_a_tagged_lock_is_shown() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    let seed = cluster.urls()[0].clone();
    let deployment = Deployment::new(repeated("redis-cluster", &cluster.urls()[..1]), ());
    let _b = deployment.spawn(&["run", "--owner", "jobB", "{t}b", "--", "sleep", "60"]);
    deployment.wait_held("{t}b");
    let inner = format!(
        "exec '{}' --redis-cluster {seed} run '{{t}}b' -- true",
        crate::common::BIN
    );
    let _a = deployment.spawn(&["run", "--owner", "jobA", "{t}a", "--", "sh", "-c", &inner]);
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(20), || {
        last = deployment.json(&["top", "--once", "--prefix", "{t}"]);
        row(&last, "{t}b").is_some_and(|lock| lock["waited_by"] == serde_json::json!(["n:jobA"]))
    });
    assert!(seen, "jobA not shown waiting for {{t}}b: {last}");
    drop(cluster);
}

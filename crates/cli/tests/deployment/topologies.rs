//! run, status, list and unlock on each topology, named by flags, by the
//! settings file's `[redis]` section and by `REDIS_URL`.

use std::time::Duration;

use testkit::{Cluster, MASTER_NAME, RedisServer, SentinelGroup, Servers};

use crate::common::{code, eventually};
use crate::harness::{Deployment, repeated};

/// Exit status of `run` when the lock was not acquired within `--wait`.
const NOT_ACQUIRED: i32 = 75;
/// Exit status of `run` when the lock was lost while the command ran.
const LOST: i32 = 79;

/// The whole life of one lock through the CLI: held by one `run`, seen by
/// `status` and `list`, refused to a second `run`, broken by `unlock`
/// (the first `run` then stops its command), and free again.
pub fn every_command_works(deployment: &Deployment, name: &str) {
    let mut holder = deployment.spawn(&["run", name, "--", "sleep", "60"]);
    let status = deployment.wait_held(name);
    assert_eq!(
        status["holders"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert!(
        status["token"].as_u64().is_some_and(|token| token >= 1),
        "{status}"
    );
    assert!(
        status["ttl_ms"].as_u64().is_some_and(|ttl| ttl > 0),
        "{status}"
    );

    let listed = deployment.json(&["list"]);
    assert!(
        listed
            .as_array()
            .is_some_and(|locks| locks.iter().any(|lock| lock["name"] == name)),
        "{name} not in {listed}"
    );

    let refused = deployment.output(&["run", name, "--wait", "300ms", "--", "true"]);
    assert_eq!(code(refused.status), NOT_ACQUIRED);

    let unlocked = deployment.output(&["unlock", name, "--force"]);
    assert_eq!(code(unlocked.status), 0);
    assert_eq!(holder.wait(Duration::from_secs(30)), Some(LOST));
    assert_eq!(deployment.json(&["status", name])["held"], false);

    let again = deployment.output(&["run", name, "--wait", "5s", "--", "true"]);
    assert_eq!(code(again.status), 0);
}

#[test]
fn one_server_by_flag_and_by_redis_url() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    every_command_works(
        &Deployment::new(vec!["--redis".into(), url.clone()], ()),
        "single",
    );
    // REDIS_URL names the server when no flag does.
    let from_env = Deployment::new(Vec::new(), ());
    let output = from_env
        .command(&["run", "from-env", "--", "true"])
        .env("REDIS_URL", &url)
        .output()
        .expect("run");
    assert_eq!(code(output.status), 0);
    drop(server);
}

#[test]
fn a_cluster_by_its_seed_nodes() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    // One seed node is enough; names land on different masters.
    let seeds = cluster.urls()[..1].to_vec();
    let deployment = Deployment::new(repeated("redis-cluster", &seeds), cluster);
    for name in ["cluster-a", "cluster-b", "cluster-c"] {
        every_command_works(&deployment, name);
    }
}

/// On `cluster`, a `run` holds a lock and another waits for it: `status`
/// names the waiter it counts (its wait-for edge, in the lock's hash-tag
/// slot, read back from every master); then `more` checks the rest with
/// the deployment, the lock's name and that status.
fn with_a_named_waiter(cluster: Cluster, more: impl FnOnce(&Deployment, &str, &serde_json::Value)) {
    let seeds = cluster.urls()[..1].to_vec();
    let deployment = Deployment::new(repeated("redis-cluster", &seeds), cluster);
    let name = "{waits}:orders";
    let _holder = deployment.spawn(&["run", name, "--", "sleep", "60"]);
    deployment.wait_held(name);
    let _waiter = deployment.spawn(&["run", name, "--wait", "60s", "--", "true"]);
    let mut status = serde_json::Value::Null;
    let named = eventually(Duration::from_secs(20), || {
        status = deployment.json(&["status", name]);
        status["waited_by"]
            .as_array()
            .is_some_and(|by| by.len() == 1)
    });
    assert!(named, "no waiter named: {status}");
    more(&deployment, name, &status);
}

/// On a cluster, `status` and `list` name who waits for a lock: the
/// waiting `run`'s party.
#[test]
fn a_cluster_shows_who_waits_for_a_lock() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    with_a_named_waiter(cluster, |deployment, name, status| {
        assert!(
            status["waited_by"][0]
                .as_str()
                .is_some_and(|party| party.starts_with("n:job:")),
            "{status}"
        );
        let listed = deployment.json(&["list"]);
        let lock = listed
            .as_array()
            .and_then(|locks| locks.iter().find(|lock| lock["name"] == name))
            .unwrap_or_else(|| panic!("{name} not in {listed}"));
        assert_eq!(lock["waited_by"], status["waited_by"], "{listed}");
    });
}

/// As [`a_cluster_shows_who_waits_for_a_lock`], on a cluster whose nodes
/// announce a hostname as their preferred endpoint (Redis 7's
/// `cluster-preferred-endpoint-type hostname`): `status` must name the
/// waiter it counts.
#[test]
fn a_cluster_announcing_hostnames_shows_who_waits_for_a_lock() {
    let cluster = Cluster::start_with_args(
        3,
        0,
        &[
            ("cluster-announce-hostname", "localhost"),
            ("cluster-preferred-endpoint-type", "hostname"),
        ],
    )
    .expect("cluster");
    with_a_named_waiter(cluster, |_, _, _| {});
}

#[test]
fn a_sentinel_group_by_its_sentinels_and_master_name() {
    let group = SentinelGroup::start(1).expect("sentinel group");
    let mut flags = repeated("sentinel", &group.sentinel_urls());
    flags.extend(["--sentinel-master".to_owned(), MASTER_NAME.to_owned()]);
    every_command_works(&Deployment::new(flags, group), "sentinel");
}

#[test]
fn redlock_masters_by_several_redis() {
    let masters = Servers::start(3).expect("three masters");
    let deployment = Deployment::new(repeated("redis", &masters.urls()), masters);
    every_command_works(&deployment, "quorum");
}

#[test]
fn the_settings_file_names_a_cluster_and_flags_override_it() {
    let cluster = Cluster::start(3, 0).expect("cluster");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redlatch.toml");
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|url| format!("{url:?}"))
        .collect();
    std::fs::write(
        &config,
        format!(
            "[redis]\nmode = \"cluster\"\nurls = [{}]\n",
            urls.join(", ")
        ),
    )
    .expect("write config");
    let config = config.to_string_lossy().into_owned();
    let from_file = Deployment::new(vec!["--config".into(), config.clone()], cluster);
    every_command_works(&from_file, "from-file");

    // A flag wins over the file: this server is not part of the cluster.
    let server = RedisServer::start().expect("redis-server");
    let flagged = Deployment::new(
        vec!["--config".into(), config, "--redis".into(), server.url()],
        server,
    );
    let output = flagged.output(&["run", "flagged", "--", "true"]);
    assert_eq!(code(output.status), 0);
    assert_eq!(from_file.json(&["status", "flagged"])["held"], false);
}

#[test]
fn a_bad_redis_section_names_its_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (text, field) in [
        (
            "[redis]\nmode = \"galaxy\"\nurls = [\"redis://127.0.0.1:1\"]\n",
            "mode",
        ),
        (
            "[redis]\nmode = \"sentinel\"\nurls = [\"redis://127.0.0.1:1\"]\n",
            "master",
        ),
        ("[redis]\nmode = \"cluster\"\nurls = []\n", "urls"),
    ] {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, text).expect("write config");
        let output = Deployment::new(vec!["--config".into(), config.to_string_lossy().into()], ())
            .output(&["status", "x"]);
        assert_eq!(code(output.status), 78, "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(field), "{text}: {stderr}");
    }
}

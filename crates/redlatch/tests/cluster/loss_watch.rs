//! The loss watch on a cluster (issue 38): a connection per master that
//! serves a held key; a real loss found within milliseconds, and no false
//! loss when the key's slot moves (classic resharding, Valkey 9's atomic
//! `CLUSTER MIGRATESLOTS`) or its master fails over. Each test failed before
//! the watch ran on a cluster (no loss found before a renewal, lease/3 = 10 s).

use std::time::{Duration, Instant};

use redlatch::{Client, ClientBuilder, Guard, LostReason};
use testkit::Cluster;

use super::master_conn;

/// Generous next to the milliseconds the watch takes; far below the 10 s
/// after which a renewal (30 s leases) would find the loss instead.
const NOTICED_WITHIN: Duration = Duration::from_secs(3);

/// Past the watch's 10 ms settling time: the held keys are tracked.
const TRACKED: Duration = Duration::from_millis(200);

pub(super) async fn watching_client(cluster: &Cluster) -> Client {
    ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .retries(5)
        .default_lease(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect to the cluster")
}

pub(super) fn node(cluster: &Cluster, port: u16) -> &testkit::RedisServer {
    let node = cluster.nodes().iter().find(|node| node.port() == port);
    node.expect("a node of the cluster")
}

pub(super) fn node_id(cluster: &Cluster, port: u16) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node(cluster, port).conn())
        .expect("CLUSTER MYID")
}

fn key_slot(cluster: &Cluster, key: &str) -> u16 {
    let port = cluster.master_of(key).unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut node(cluster, port).conn())
        .expect("CLUSTER KEYSLOT")
}

/// HEXISTS calls `port` ran so far (the watch's reads).
fn hexists_calls(cluster: &Cluster, port: u16) -> u64 {
    command_calls(cluster, port, "hexists")
}

/// Calls of `command` (lower case) `port` ran so far.
pub(super) fn command_calls(cluster: &Cluster, port: u16, command: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node(cluster, port).conn())
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// The new owner tracks the key: it is not read again and again while
/// nothing changes it.
async fn tracked_not_polled(cluster: &Cluster, port: u16) {
    let before = hexists_calls(cluster, port);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reads = hexists_calls(cluster, port) - before;
    eprintln!("reads on the new owner in 500 ms: {reads}");
    assert!(
        reads <= 1,
        "{reads} reads in 500 ms: the key is polled, not tracked"
    );
}

/// After a slot moved with a held lock: the new owner keeps the hold (no
/// other client takes it, its token stands), tracks the key (no polling),
/// and a DEL there is found as a loss.
async fn kept_by_the_new_owner_then_lost_there(
    guard: &Guard,
    other: &redlatch::Client,
    name: &str,
    token: u64,
    cluster: &Cluster,
    target: u16,
) {
    assert!(other.lock(name).try_acquire().await.unwrap().is_none());
    assert_eq!(
        other.lock(name).status().await.unwrap().last_token,
        Some(token)
    );
    tracked_not_polled(cluster, target).await;
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(cluster, target).conn())
        .unwrap();
    noticed(guard, "DEL on the new owner").await;
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// Fails the test when `guard` was marked lost.
fn still_held(guard: &Guard, when: &str) {
    assert!(
        guard.is_held(),
        "{when}: the hold was called lost ({:?}) though its key lives on",
        guard.lost_reason()
    );
}

async fn noticed(guard: &Guard, what: &str) -> Duration {
    let started = Instant::now();
    tokio::time::timeout(NOTICED_WITHIN, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("{what}: the loss went unnoticed for {NOTICED_WITHIN:?}"));
    let took = started.elapsed();
    eprintln!("{what}: lost noticed after {took:?}");
    took
}

/// Three names on three masters.
fn names_on_every_master(cluster: &Cluster, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut masters = std::collections::BTreeSet::new();
    for i in 0.. {
        let name = format!("{prefix}:{i}");
        if masters.insert(cluster.master_of(&name).unwrap()) {
            names.push(name);
        }
        if names.len() == 3 {
            return names;
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_expired_or_force_unlocked_hold_is_lost_within_milliseconds_on_every_master() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = watching_client(&cluster).await;
    let other = watching_client(&cluster).await;
    let names = names_on_every_master(&cluster, "watched");
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name.as_str()).acquire().await.unwrap());
    }
    tokio::time::sleep(TRACKED).await;
    // What the watch costs: one tracking connection on each master that
    // serves a held key (here all three), none more.
    for name in &names {
        let port = cluster.master_of(name).unwrap();
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut node(&cluster, port).conn())
            .unwrap();
        let tracking = clients
            .lines()
            .filter(|line| {
                line.split_whitespace()
                    .find_map(|field| field.strip_prefix("flags="))
                    .is_some_and(|flags| flags.contains('t'))
            })
            .count();
        eprintln!("master {port}: {tracking} tracking connection(s)");
        assert_eq!(tracking, 1, "master {port}: {clients}");
    }

    let _: () = redis::cmd("DEL")
        .arg(&names[0])
        .query(&mut master_conn(&cluster, &names[0]))
        .unwrap();
    noticed(&guards[0], "DEL").await;
    assert_eq!(guards[0].lost_reason(), Some(LostReason::Gone));

    let _: () = redis::cmd("PEXPIRE")
        .arg(&names[1])
        .arg(1)
        .query(&mut master_conn(&cluster, &names[1]))
        .unwrap();
    noticed(&guards[1], "expiry").await;
    assert_eq!(guards[1].lost_reason(), Some(LostReason::Gone));

    assert!(other.lock(names[2].as_str()).force_unlock().await.unwrap());
    noticed(&guards[2], "force-unlock by another client").await;
    assert_eq!(guards[2].lost_reason(), Some(LostReason::Gone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_of_one_master_loses_its_holds_and_no_other() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = watching_client(&cluster).await;
    let names = names_on_every_master(&cluster, "flushed");
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name.as_str()).acquire().await.unwrap());
    }
    tokio::time::sleep(TRACKED).await;
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut master_conn(&cluster, &names[1]))
        .unwrap();
    noticed(&guards[1], "FLUSHALL").await;
    tokio::time::sleep(TRACKED).await;
    still_held(&guards[0], "another master's flush");
    still_held(&guards[2], "another master's flush");
}

/// A classic resharding of the held key's slot, step by step as
/// `redis-cli --cluster reshard` does it: `IMPORTING` on the target,
/// `MIGRATING` on the source, `MIGRATE` of the key (the source then answers
/// `ASK` for it), `SETSLOT … NODE` everywhere (then `MOVED`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resharded_slot_keeps_its_hold_and_the_new_owner_s_losses_are_found() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = watching_client(&cluster).await;
    let other = watching_client(&cluster).await;
    let name = "resharded:1";
    let guard = client.lock(name).acquire().await.unwrap();
    let token = guard.token();
    tokio::time::sleep(TRACKED).await;

    let slot = key_slot(&cluster, name);
    let source = cluster.master_of(name).unwrap();
    let masters: Vec<u16> = cluster
        .nodes()
        .iter()
        .map(testkit::RedisServer::port)
        .collect();
    let target = *masters.iter().find(|port| **port != source).unwrap();
    let (source_id, target_id) = (node_id(&cluster, source), node_id(&cluster, target));
    let setslot = |port: u16, how: &str, id: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(how)
            .arg(id)
            .query(&mut node(&cluster, port).conn())
            .unwrap_or_else(|error| panic!("SETSLOT {how} on {port}: {error}"));
    };
    setslot(target, "IMPORTING", &source_id);
    setslot(source, "MIGRATING", &target_id);
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(target)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(name)
        .query(&mut node(&cluster, source).conn())
        .expect("MIGRATE the lock's key");
    // The source answers ASK for the key now: the watch reads it there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    still_held(&guard, "the key migrated, the slot not yet handed over");
    for port in &masters {
        setslot(*port, "NODE", &target_id);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    still_held(&guard, "the slot handed over");
    assert_eq!(cluster.master_of(name).unwrap(), target);
    kept_by_the_new_owner_then_lost_there(&guard, &other, name, token, &cluster, target).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_keeps_a_replicated_hold_and_the_new_master_s_losses_are_found() {
    let mut cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let holder = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .retries(5)
        .default_lease(Duration::from_secs(30))
        .wait_for_replicas(1, Duration::from_secs(2))
        .connect()
        .await
        .expect("connect");
    let name = "failover:watched";
    let guard = holder.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;
    let old = cluster.master_of(name).unwrap();
    let (cluster, new) = tokio::task::spawn_blocking(move || {
        let new = cluster.kill_master_of(name);
        (cluster, new)
    })
    .await
    .unwrap();
    let new = new.expect("a replica takes over");
    assert_ne!(old, new);
    // The watch reconnects and reads the key on the new master.
    tokio::time::sleep(Duration::from_secs(3)).await;
    still_held(&guard, "after the failover");

    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, new).conn())
        .unwrap();
    noticed(&guard, "DEL on the promoted master").await;
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// True (and says the test is skipped) when the cluster's servers cannot
/// move slots atomically (`CLUSTER MIGRATESLOTS`, Valkey 9+).
fn lacks_migrateslots(cluster: &Cluster) -> bool {
    let port = cluster.nodes()[0].port();
    let docs: redis::RedisResult<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("CLUSTER|MIGRATESLOTS")
        .query(&mut node(cluster, port).conn());
    let has = matches!(docs, Ok(redis::Value::Array(entries)) if entries.iter().any(|entry| !matches!(entry, redis::Value::Nil)));
    if !has {
        eprintln!("skipped: this server has no CLUSTER MIGRATESLOTS (Valkey 9+ does)");
    }
    !has
}

/// Valkey 9's atomic slot migration: the lock's key is copied to the
/// target, the slot handed over, and the source deletes its copy (an
/// invalidation to every client tracking it) and answers `MOVED`. The hold
/// lives on, and a loss on the new owner is found at once. Skipped (and
/// said so) on a server without `CLUSTER MIGRATESLOTS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_atomic_slot_migration_keeps_the_hold_and_the_new_owner_s_losses_are_found() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    if lacks_migrateslots(&cluster) {
        return;
    }
    let client = watching_client(&cluster).await;
    let other = watching_client(&cluster).await;
    let name = "migrated:1";
    let guard = client.lock(name).acquire().await.unwrap();
    let token = guard.token();
    tokio::time::sleep(TRACKED).await;

    let source = cluster.master_of(name).unwrap();
    let target = migrate_slot(&cluster, name, source, || {
        still_held(&guard, "during the migration");
    })
    .await;
    // The source deletes its copy after the hand-over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    still_held(&guard, "after the migration");
    kept_by_the_new_owner_then_lost_there(&guard, &other, name, token, &cluster, target).await;
}

/// One master stalls (`DEBUG SLEEP`) while the watch reads there: the
/// other masters' losses are still found at once, not after the stalled
/// one answers (each node's reads run on their own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_master_holds_up_no_other_master_s_losses() {
    let cluster = Cluster::start_with_args(3, 0, &[("enable-debug-command", "yes")])
        .expect("start a 3-master cluster");
    // Far longer than the stall: the watch waits for the stalled node.
    let client = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(20))
        .retry_delay(Duration::from_millis(50))
        .default_lease(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect to the cluster");
    let names = names_on_every_master(&cluster, "stalled");
    let sound = client.lock(names[1].as_str()).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;
    let stalled_port = cluster.master_of(&names[0]).unwrap();
    // Asked now: a stalled node cannot answer `master_of`.
    let mut sound_master = master_conn(&cluster, &names[1]);
    let mut stalled_admin = node(&cluster, stalled_port)
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // A new hold there: the watch's first read of it (10 ms after) meets
    // the stalled master.
    let _new = client.lock(names[0].as_str()).acquire().await.unwrap();
    let sleeping = tokio::spawn(async move {
        let _: redis::RedisResult<()> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(6)
            .query_async(&mut stalled_admin)
            .await;
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _: () = redis::cmd("DEL")
        .arg(&names[1])
        .query(&mut sound_master)
        .unwrap();
    noticed(&sound, "DEL on a sound master while another stalls").await;
    sleeping.await.unwrap();
}

/// Valkey 9's numbered databases on a cluster: writes to a held lock's
/// name in another database invalidate it (invalidations name no
/// database); the watch reads it again in its own database and finds the
/// hold. Skipped (and said so) on a server without `cluster-databases`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_the_same_name_in_another_database_of_a_cluster_are_no_loss() {
    let cluster = match Cluster::start_with_args(3, 0, &[("cluster-databases", "16")]) {
        Ok(cluster) => cluster,
        Err(error) if error.to_string().contains("cluster-databases") => {
            eprintln!("skipped: this server has no numbered databases on a cluster ({error})");
            return;
        }
        Err(error) => panic!("start a 3-master cluster: {error}"),
    };
    let client = watching_client(&cluster).await;
    let name = "same:name:1";
    let guard = client.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;
    let mut db5 = master_conn(&cluster, name);
    let _: () = redis::cmd("SELECT").arg(5).query(&mut db5).unwrap();
    for round in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(name)
            .arg(round)
            .query(&mut db5)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let _: () = redis::cmd("DEL").arg(name).query(&mut db5).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    still_held(&guard, "writes to the name in database 5");
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut master_conn(&cluster, name))
        .unwrap();
    noticed(&guard, "DEL in the hold's own database").await;
}

/// A client for the failover tests: every write waits for a replica,
/// so that the hold survives the failover.
pub(super) async fn replicated_client(cluster: &Cluster, lease: Duration) -> Client {
    ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .retries(5)
        .default_lease(lease)
        .wait_for_replicas(1, Duration::from_secs(2))
        .connect()
        .await
        .expect("connect")
}

/// The port of the replica of the master at `port`. Asked until the
/// master lists it: right after a failover (or the cluster's start) the
/// master may not have heard of its replica yet (gossip), and lists none.
pub(super) fn replica_of(cluster: &Cluster, port: u16) -> u16 {
    let id = node_id(cluster, port);
    let started = std::time::Instant::now();
    loop {
        let replicas: Vec<String> = redis::cmd("CLUSTER")
            .arg("REPLICAS")
            .arg(&id)
            .query(&mut node(cluster, port).conn())
            .expect("CLUSTER REPLICAS");
        let replica = replicas
            .first()
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|address| address.split(['@', ',']).next())
            .and_then(|address| address.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok());
        if let Some(replica) = replica {
            return replica;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the master at {port} lists no replica after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `CLUSTER FAILOVER` on `replica`; waits until it serves `name`, the
/// hold kept all along.
async fn fail_over_to(cluster: &Cluster, replica: u16, name: &str, guard: &Guard) {
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut node(cluster, replica).conn())
        .expect("CLUSTER FAILOVER");
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.master_of(name).ok() != Some(replica) {
        assert!(
            Instant::now() < deadline,
            "the replica did not take over in 20 s"
        );
        still_held(guard, "during the failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A manual failover (`CLUSTER FAILOVER` on the replica): the old master
/// becomes a replica and keeps the watch's connection open. The hold lives
/// on, and a DEL on the new master is found at once (the demoted node
/// applies it and invalidates; the read that follows goes to the new
/// master through `MOVED`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_keeps_the_hold_and_the_new_master_s_losses_are_found() {
    let cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let holder = replicated_client(&cluster, Duration::from_secs(30)).await;
    let name = "manual:failover";
    let guard = holder.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;
    let old = cluster.master_of(name).unwrap();
    let replica = replica_of(&cluster, old);
    fail_over_to(&cluster, replica, name, &guard).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    still_held(&guard, "after the failover");
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, replica).conn())
        .unwrap();
    noticed(&guard, "DEL on the new master").await;
}

/// A manual failover whose demoted master cannot replicate from the new
/// one (its `masterauth` is wrong: the link stays down): it applies no
/// change of the new master, so it pushes no invalidation, yet the watch's
/// connection to it stays open. The watch asks its nodes' `ROLE` (every
/// second while idle), leaves the demoted node for the slot's new master,
/// and a DEL there is found within seconds, not at the next renewal
/// (lease/3 = 20 s). Failed before: unnoticed for 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_master_with_a_broken_link_is_left_for_the_new_master() {
    let cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let holder = replicated_client(&cluster, Duration::from_secs(60)).await;
    let name = "demoted:broken-link";
    let guard = holder.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;
    let old = cluster.master_of(name).unwrap();
    let replica = replica_of(&cluster, old);
    // Once demoted, the old master's replication handshake fails.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg("not-the-password")
        .query(&mut node(&cluster, old).conn())
        .expect("CONFIG SET masterauth");
    fail_over_to(&cluster, replica, name, &guard).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let replication: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut node(&cluster, old).conn())
        .expect("INFO replication");
    assert!(
        replication.contains("role:slave") && replication.contains("link_status:down"),
        "the demoted master should be a replica with its link down: {replication}"
    );
    still_held(&guard, "after the failover");
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, replica).conn())
        .unwrap();
    noticed(&guard, "DEL on the new master, the old one's link down").await;
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// Half-way through a classic resharding (the key moved, the slot not yet
/// handed over) the key lives on the target, read there through `ASK`: a
/// loss there is found by those reads, not by the next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_on_the_target_half_way_through_a_resharding_is_found() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = watching_client(&cluster).await;
    let name = "half-resharded:1";
    let guard = client.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;

    let slot = key_slot(&cluster, name);
    let source = cluster.master_of(name).unwrap();
    let target = cluster
        .nodes()
        .iter()
        .map(testkit::RedisServer::port)
        .find(|port| *port != source)
        .unwrap();
    let (source_id, target_id) = (node_id(&cluster, source), node_id(&cluster, target));
    for (port, how, id) in [
        (target, "IMPORTING", &source_id),
        (source, "MIGRATING", &target_id),
    ] {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(how)
            .arg(id)
            .query(&mut node(&cluster, port).conn())
            .unwrap_or_else(|error| panic!("SETSLOT {how} on {port}: {error}"));
    }
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(target)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(name)
        .query(&mut node(&cluster, source).conn())
        .expect("MIGRATE the lock's key");
    tokio::time::sleep(Duration::from_millis(300)).await;
    still_held(&guard, "the key migrated, the slot not yet handed over");

    // Deleted on the target, which serves the key only to `ASKING`.
    let (deleted,): (u32,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, target).conn())
        .expect("ASKING DEL on the target");
    assert_eq!(deleted, 1, "the key lived on the target");
    noticed(&guard, "DEL on the target half-way through a resharding").await;
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// The watch's own connection to a master is killed (`CLIENT KILL`, an
/// operator or a `maxmemory-clients` eviction): it opens another and a
/// loss after that is still found within milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_watch_connection_is_replaced_and_a_later_loss_found() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = watching_client(&cluster).await;
    let name = "killed-watch:1";
    let guard = client.lock(name).acquire().await.unwrap();
    tokio::time::sleep(TRACKED).await;

    let mut admin = master_conn(&cluster, name);
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    let tracking: Vec<&str> = clients
        .lines()
        .filter(|line| {
            line.split(' ').any(|field| {
                field
                    .strip_prefix("flags=")
                    .is_some_and(|f| f.contains('t'))
            })
        })
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .collect();
    assert_eq!(tracking.len(), 1, "one tracking connection: {clients}");
    let killed: u32 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(tracking[0])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    still_held(&guard, "the watch's connection killed");

    let _: () = redis::cmd("DEL").arg(name).query(&mut admin).unwrap();
    noticed(&guard, "DEL after the watch's connection was killed").await;
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// Tracking connections (`CLIENT LIST` flag `t`) on the node at `port`.
pub(super) fn tracking_connections(cluster: &Cluster, port: u16) -> usize {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut node(cluster, port).conn())
        .expect("CLIENT LIST");
    clients
        .lines()
        .filter(|line| {
            line.split(' ').any(|field| {
                field
                    .strip_prefix("flags=")
                    .is_some_and(|f| f.contains('t'))
            })
        })
        .count()
}

/// Seeds that name replicas first: the watch reads each key on its master
/// and keeps no tracking connection on a replica, which only redirects
/// (README: one connection per master).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_first_among_the_seeds_keep_no_watch_connection() {
    let cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let mut seeds = cluster.urls();
    seeds.reverse();
    let client = ClientBuilder::cluster(seeds)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .retries(5)
        .default_lease(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect to the cluster");
    let names = names_on_every_master(&cluster, "replica-seeds");
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name.as_str()).acquire().await.unwrap());
    }
    tokio::time::sleep(TRACKED).await;
    let masters: Vec<u16> = names
        .iter()
        .map(|n| cluster.master_of(n).unwrap())
        .collect();
    for server in cluster.nodes() {
        let port = server.port();
        let tracking = tracking_connections(&cluster, port);
        if masters.contains(&port) {
            assert_eq!(tracking, 1, "master {port}: one watch connection");
        } else {
            assert_eq!(tracking, 0, "replica {port} keeps a watch connection");
        }
    }
    // And the watch still works.
    let _: () = redis::cmd("DEL")
        .arg(&names[0])
        .query(&mut master_conn(&cluster, &names[0]))
        .unwrap();
    noticed(&guards[0], "DEL with replicas first among the seeds").await;
}

/// A token lock's waiter: its guard (or error), and when it returned.
pub(super) type TokenWaiter =
    tokio::task::JoinHandle<(redlatch::Result<redlatch::TokenGuard>, Instant)>;

pub(super) fn token_waiter(client: &Client, name: &str) -> TokenWaiter {
    let lock = client.token_lock(name);
    tokio::spawn(async move {
        let guard = lock.acquire_within(Some(Duration::from_secs(30))).await;
        (guard, Instant::now())
    })
}

/// The waiter stays parked on the master at `port` without polling it: a
/// poll (2 ms doubling to 100 ms) would make some 20 attempts (`SET NX`)
/// in 2 s; a waiter that tracks the key looks again once a second.
async fn parked_without_polling(cluster: &Cluster, port: u16, waiting: &TokenWaiter) {
    let before = command_calls(cluster, port, "set");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = command_calls(cluster, port, "set") - before;
    eprintln!("attempts on {port} in 2 s while parked: {attempts}");
    assert!(!waiting.is_finished(), "the waiter did not wait");
    assert!(
        attempts <= 6,
        "{attempts} attempts in 2 s: the waiter polls, the key is not tracked"
    );
}

/// The release wakes the waiter, which takes the lock.
async fn woken_by_the_release(guard: redlatch::TokenGuard, waiting: TokenWaiter) {
    let released = Instant::now();
    guard.release().await.unwrap();
    let (taken, at) = waiting.await.unwrap();
    let taken = taken.expect("the waiter takes the lock after the release");
    let late = at.duration_since(released);
    eprintln!("the waiter took the lock {late:?} after the release");
    assert!(
        late < Duration::from_secs(2),
        "woken {late:?} after the release"
    );
    taken.release().await.unwrap();
}

/// A token lock's waiter on a cluster tracks the key it waits for on the
/// slot's master (through the loss watch's connection there), as on one
/// server: it is woken by the release, and does not poll meanwhile. Failed
/// before: the waiter polled (some 20 attempts in 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_lock_waiter_is_woken_by_the_release_and_does_not_poll() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let name = "token-wait:1";
    let port = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    parked_without_polling(&cluster, port, &waiting).await;
    woken_by_the_release(guard, waiting).await;
}

/// The slot of the key a token lock's waiter waits for moves (Valkey 9's
/// `CLUSTER MIGRATESLOTS`) while it waits: the source's delete wakes it,
/// it tracks the key on the new owner from then on (no polling there),
/// and the release there wakes it. Skipped (and said so) on a server
/// without `CLUSTER MIGRATESLOTS`. Failed before: the waiter polled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_lock_waiter_keeps_its_wake_up_across_a_slot_migration() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    if lacks_migrateslots(&cluster) {
        return;
    }
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let name = "token-migrated:1";
    let source = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    parked_without_polling(&cluster, source, &waiting).await;

    let target = migrate_slot(&cluster, name, source, || {}).await;
    // The source deletes its copy after the hand-over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(guard.is_held(), "the holder kept its lock");
    parked_without_polling(&cluster, target, &waiting).await;
    woken_by_the_release(guard, waiting).await;
}

/// A cluster whose ACL refuses tracking (`-client|tracking`): the watch is
/// off, and a token lock's waiter is told so at once and polls. Failed
/// before: its look waited for an answer the stopped watch never sent, a
/// response timeout (2 s) per look, one attempt where a poll makes some 20.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_lock_waiter_polls_where_the_cluster_refuses_tracking() {
    let (cluster, urls) = cluster_for_app_user("-client|tracking");
    let (holder, waiter) = (app_client(&urls).await, app_client(&urls).await);
    let name = "token-untracked:1";
    let port = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = command_calls(&cluster, port, "set");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = command_calls(&cluster, port, "set") - before;
    eprintln!("attempts in 2 s with the watch off: {attempts}");
    assert!(
        attempts >= 8,
        "{attempts} attempts in 2 s: the waiter's looks wait instead of polling"
    );
    woken_by_the_release(guard, waiting).await;
}

/// Moves `name`'s slot from `source` to another master at once (`CLUSTER
/// MIGRATESLOTS`, Valkey 9), calling `meanwhile` while it waits to see the
/// slot served there; returns that master's port.
pub(super) async fn migrate_slot(
    cluster: &Cluster,
    name: &str,
    source: u16,
    mut meanwhile: impl FnMut(),
) -> u16 {
    let slot = key_slot(cluster, name);
    let target = cluster
        .nodes()
        .iter()
        .map(testkit::RedisServer::port)
        .find(|port| *port != source)
        .unwrap();
    let target_id = node_id(cluster, target);
    let _: () = redis::cmd("CLUSTER")
        .arg("MIGRATESLOTS")
        .arg("SLOTSRANGE")
        .arg(slot)
        .arg(slot)
        .arg("NODE")
        .arg(&target_id)
        .query(&mut node(cluster, source).conn())
        .expect("CLUSTER MIGRATESLOTS");
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.master_of(name).ok() != Some(target) {
        assert!(Instant::now() < deadline, "the slot did not move in 20 s");
        meanwhile();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    target
}

/// A 3-master cluster with a user `app` (password `app-secret`) whose ACL
/// is everything but `refused` (e.g. `-role`), and the URLs of its nodes
/// as that user.
pub(super) fn cluster_for_app_user(refused: &str) -> (Cluster, Vec<String>) {
    let app_user = format!("app on >app-secret ~* &* +@all {refused}");
    let cluster = Cluster::start_with_args(
        3,
        0,
        &[
            ("user", app_user.as_str()),
            ("user", "default on nopass ~* &* +@all"),
        ],
    )
    .expect("start a 3-master cluster");
    let urls = cluster
        .nodes()
        .iter()
        .map(|node| format!("redis://app:app-secret@127.0.0.1:{}", node.port()))
        .collect();
    (cluster, urls)
}

/// A client of the cluster at `urls` (as built by [`cluster_for_app_user`]).
pub(super) async fn app_client(urls: &[String]) -> Client {
    ClientBuilder::cluster(urls.to_vec())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .default_lease(Duration::from_secs(30))
        .connect()
        .await
        .unwrap()
}

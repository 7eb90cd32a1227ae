//! Token lock waiters on a cluster under strain: many keys across slots,
//! waiters that leave while their key is tracked, the watch's connections
//! killed, a tiny tracking table, a `ROLE` the ACL refuses, a failover and
//! back. Each waiter must still be woken (or poll) within generous bounds.

use std::time::{Duration, Instant};

use redlatch::{Client, ClientBuilder, TokenGuard};
use testkit::Cluster;

use super::loss_watch::{
    TokenWaiter, app_client, cluster_for_app_user, command_calls, node, replica_of,
    replicated_client, token_waiter, watching_client,
};

/// Far above the milliseconds a tracked wake-up takes, and above a poll's
/// 100 ms back-off; far below the 30 s a waiter waits.
const WOKEN_WITHIN: Duration = Duration::from_secs(5);

/// The waiter's guard, taken within [`WOKEN_WITHIN`] of `released`.
async fn taken_soon(waiting: TokenWaiter, released: Instant, what: &str) -> TokenGuard {
    let (taken, at) = tokio::time::timeout(WOKEN_WITHIN + Duration::from_secs(1), waiting)
        .await
        .unwrap_or_else(|_| panic!("{what}: the waiter still waits"))
        .unwrap();
    let guard = taken.unwrap_or_else(|error| panic!("{what}: {error}"));
    let late = at.saturating_duration_since(released);
    eprintln!("{what}: taken {late:?} after the release");
    assert!(
        late < WOKEN_WITHIN,
        "{what}: woken {late:?} after the release"
    );
    guard
}

/// `per_master` names on each of the three masters: keys in many slots.
fn names_across_slots(cluster: &Cluster, prefix: &str, per_master: usize) -> Vec<String> {
    let mut per_node = std::collections::BTreeMap::<u16, usize>::new();
    let mut names = Vec::new();
    for i in 0.. {
        let name = format!("{prefix}:{i}");
        let count = per_node
            .entry(cluster.master_of(&name).unwrap())
            .or_default();
        if *count < per_master {
            *count += 1;
            names.push(name);
        }
        if per_node.len() == 3 && per_node.values().all(|count| *count == per_master) {
            return names;
        }
    }
    unreachable!()
}

/// Many waiters (two per key, of two clients) on 48 keys across the
/// slots of three masters: every one is woken by its key's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_token_waiters_on_keys_across_slots_are_all_woken() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let holder = watching_client(&cluster).await;
    let waiters = [
        watching_client(&cluster).await,
        watching_client(&cluster).await,
    ];
    let names = names_across_slots(&cluster, "many-waiters", 16);
    let guards = hold_all(&holder, &names).await;
    let mut waiting = Vec::new();
    for name in &names {
        for client in &waiters {
            let lock = client.token_lock(name.as_str());
            waiting.push(tokio::spawn(async move {
                let guard = lock.acquire_within(Some(Duration::from_secs(30))).await?;
                let at = Instant::now();
                guard.release().await?;
                Ok::<_, redlatch::Error>(at)
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(waiting.iter().all(|task| !task.is_finished()));
    let released = Instant::now();
    for guard in guards {
        guard.release().await.unwrap();
    }
    for task in waiting {
        let at = tokio::time::timeout(WOKEN_WITHIN * 2, task)
            .await
            .expect("a waiter still waits")
            .unwrap()
            .unwrap();
        assert!(at.duration_since(released) < WOKEN_WITHIN * 2);
    }
}

/// Waiters that leave while their key is tracked (one times out, one is
/// dropped): the release wakes nobody into taking it, nothing keeps
/// reading the key, and a later waiter on the key is woken as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_waiters_that_leave_take_nothing_and_leave_no_reads_behind() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let name = "leaving-waiters:1";
    let port = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();

    let timed_out = waiter
        .token_lock(name)
        .acquire_within(Some(Duration::from_millis(300)))
        .await;
    assert!(matches!(timed_out, Err(redlatch::Error::Timeout { .. })));
    let dropped = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());

    guard.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = holder.token_lock(name).status().await.unwrap();
    assert!(!status.held, "a waiter that left took the lock: {status:?}");
    let before = command_calls(&cluster, port, "pttl") + command_calls(&cluster, port, "set");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = command_calls(&cluster, port, "pttl") + command_calls(&cluster, port, "set");
    assert!(
        after - before <= 1,
        "{} looks in 1 s with no waiter left",
        after - before
    );

    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    taken_soon(waiting, released, "a later waiter")
        .await
        .release()
        .await
        .unwrap();
}

/// `CLIENT KILL TYPE normal` on the key's master while a waiter parks:
/// every connection there dies, the watch's among them. The waiter is
/// still woken by the release (or polls) within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_token_waiter_is_woken_after_its_master_s_connections_are_killed() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let name = "killed-while-parked:1";
    let port = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..2 {
        let killed: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query(&mut node(&cluster, port).conn())
            .unwrap();
        eprintln!("killed {killed} connections");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(!waiting.is_finished(), "the waiter gave up: {waiting:?}");
    assert!(guard.is_held());
    let released = Instant::now();
    guard.release().await.unwrap();
    taken_soon(waiting, released, "after CLIENT KILL")
        .await
        .release()
        .await
        .unwrap();
}

/// A master whose tracking table holds one key (`tracking-table-max-keys
/// 1`): each waiter's look evicts another's key, which tells that waiter
/// its key changed. The waiters must neither spin on those wake-ups nor
/// miss their release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_waiters_on_a_master_with_a_one_key_tracking_table() {
    let cluster = one_key_tracking_cluster();
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let names: Vec<String> = (0..6).map(|i| format!("{{tiny}}:{i}")).collect();
    let port = cluster.master_of(&names[0]).unwrap();
    let guards = hold_all(&holder, &names).await;
    let waiting: Vec<TokenWaiter> = names
        .iter()
        .map(|name| token_waiter(&waiter, name))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let spent = calls_in_two_seconds(&cluster, port, &["pttl", "set"]).await;
    eprintln!("looks by 6 waiters in 2 s with a one-key tracking table: {spent}");
    // Polling all along (2 ms growing to 100 ms) costs some 20 looks per
    // waiter in 2 s, 2 calls each: 240. A spin costs thousands.
    assert!(spent <= 400, "{spent} looks in 2 s: the waiters spin");
    let released = Instant::now();
    for guard in guards {
        guard.release().await.unwrap();
    }
    for (waiting, name) in waiting.into_iter().zip(&names) {
        taken_soon(waiting, released, name)
            .await
            .release()
            .await
            .unwrap();
    }
}

/// A cluster whose ACL refuses `ROLE` to the application's user: the
/// watch does without it; a waiter is woken by the release, and a held
/// lock's loss is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_waiters_and_the_watch_work_where_the_acl_refuses_role() {
    let (cluster, urls) = cluster_for_app_user("-role");
    let (holder, waiter) = (app_client(&urls).await, app_client(&urls).await);
    let name = "role-refused:1";
    let port = cluster.master_of(name).unwrap();
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let taken = taken_soon(waiting, released, "ROLE refused").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, port).conn())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), taken.lost())
        .await
        .expect("the DEL of a held token lock went unnoticed with ROLE refused");
}

/// `CLUSTER FAILOVER` on `replica`; waits until it serves `name`.
async fn fail_over_to(cluster: &Cluster, replica: u16, name: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut node(cluster, replica).conn())
        .expect("CLUSTER FAILOVER");
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.master_of(name).ok() != Some(replica) {
        assert!(
            Instant::now() < deadline,
            "{replica} did not take over in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A failover and a failover back (`CLUSTER FAILOVER` twice) while a
/// waiter parks: the holder keeps its lock, the waiter is woken by the
/// release on the master of the end, and a loss there is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_waiter_across_a_failover_and_back() {
    let cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let holder = replicated_client(&cluster, Duration::from_secs(30)).await;
    let waiter = replicated_client(&cluster, Duration::from_secs(30)).await;
    let name = "failover-and-back:1";
    let first = cluster.master_of(name).unwrap();
    let second = replica_of(&cluster, first);
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    fail_over_to(&cluster, second, name).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    fail_over_to(&cluster, first, name).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        guard.is_held(),
        "lost across the failovers: {:?}",
        guard.lost_reason()
    );
    assert!(!waiting.is_finished(), "the waiter did not wait");
    let released = Instant::now();
    guard.release().await.unwrap();
    let taken = taken_soon(waiting, released, "after a failover and back").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query(&mut node(&cluster, first).conn())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), taken.lost())
        .await
        .expect("a DEL after the failover back went unnoticed");
}

/// One master stalls (SIGSTOP) while waiters park on keys of two masters:
/// the other master's waiter is woken by its release as usual, and the
/// stalled master's waiter takes its lock once the master is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_master_holds_up_no_other_master_s_token_waiters() {
    // A stall past the node timeout (1 s) marks the master failed: without
    // this, the whole cluster then answers CLUSTERDOWN.
    let cluster = Cluster::start_with_args(3, 0, &[("cluster-require-full-coverage", "no")])
        .expect("start a 3-master cluster");
    let holder = watching_client(&cluster).await;
    let waiter = watching_client(&cluster).await;
    let names = names_across_slots(&cluster, "stalled", 1);
    let (stalled, sound) = (&names[0], &names[1]);
    let stalled_port = cluster.master_of(stalled).unwrap();
    let stalled_guard = holder.token_lock(stalled.as_str()).acquire().await.unwrap();
    let sound_guard = holder.token_lock(sound.as_str()).acquire().await.unwrap();
    let stalled_waiting = token_waiter(&waiter, stalled);
    let sound_waiting = token_waiter(&waiter, sound);
    tokio::time::sleep(Duration::from_millis(500)).await;
    node(&cluster, stalled_port).pause().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let released = Instant::now();
    sound_guard.release().await.unwrap();
    let taken = taken_soon(sound_waiting, released, "beside a stalled master").await;
    node(&cluster, stalled_port).resume().unwrap();
    taken.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    // The holder's own release may need a retry after the stall.
    let _ = stalled_guard.release().await;
    taken_soon(stalled_waiting, released, "after the stall")
        .await
        .release()
        .await
        .unwrap();
}

/// Held token locks (no waiters) on a master whose tracking table holds
/// one key: the watch's re-reads of evicted keys are paced, not a spin,
/// and a real loss is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_token_locks_on_a_master_with_a_one_key_tracking_table() {
    let cluster = one_key_tracking_cluster();
    let holder = watching_client(&cluster).await;
    let names: Vec<String> = (0..6).map(|i| format!("{{tiny-held}}:{i}")).collect();
    let port = cluster.master_of(&names[0]).unwrap();
    let guards = hold_all(&holder, &names).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reads = calls_in_two_seconds(&cluster, port, &["get"]).await;
    eprintln!("the watch's reads of 6 held keys in 2 s with a one-key table: {reads}");
    assert!(reads <= 400, "{reads} reads in 2 s: the watch spins");
    let _: () = redis::cmd("DEL")
        .arg(&names[3])
        .query(&mut node(&cluster, port).conn())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), guards[3].lost())
        .await
        .expect("a DEL went unnoticed with a one-key tracking table");
    for (i, guard) in guards.iter().enumerate() {
        assert_eq!(
            guard.is_held(),
            i != 3,
            "hold {i}: {:?}",
            guard.lost_reason()
        );
    }
}

/// A failover whose demoted master cannot replicate from the new one (a
/// wrong `masterauth`): a waiter whose key was tracked on the old master
/// hears nothing there, yet is woken by the release on the new master
/// within seconds (the `ROLE` check, or its own next look).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_waiter_tracked_on_a_demoted_master_with_a_broken_link() {
    let cluster = Cluster::start(3, 1).expect("start a 3-master cluster with replicas");
    let holder = replicated_client(&cluster, Duration::from_secs(60)).await;
    let waiter = replicated_client(&cluster, Duration::from_secs(60)).await;
    let name = "demoted-waiter:1";
    let old = cluster.master_of(name).unwrap();
    let new = replica_of(&cluster, old);
    let guard = holder.token_lock(name).acquire().await.unwrap();
    let waiting = token_waiter(&waiter, name);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg("not-the-password")
        .query(&mut node(&cluster, old).conn())
        .expect("CONFIG SET masterauth");
    fail_over_to(&cluster, new, name).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(guard.is_held(), "{:?}", guard.lost_reason());
    assert!(!waiting.is_finished(), "the waiter did not wait");
    let released = Instant::now();
    guard.release().await.unwrap();
    taken_soon(waiting, released, "tracked on a demoted master")
        .await
        .release()
        .await
        .unwrap();
}

/// The cluster watch reads each hold's owner back after every renewal (a
/// renewal invalidates the key): owners named like an anonymous owner's
/// number, anonymous ones (kept as numbers) and token locks' tokens, on
/// every master, renewed every 100 ms, must all stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_watch_keeps_holds_of_every_kind_of_owner_through_renewals() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let client = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .default_lease(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let names = names_across_slots(&cluster, "owners", 3);
    let mut guards = Vec::new();
    let mut tokens = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let lock = client.lock(format!("{name}:lock"));
        let owner = ["0", "18446744073709551615", "7", "worker"][i % 4];
        guards.push(lock.clone().with_owner(owner).acquire().await.unwrap());
        guards.push(client.lock(format!("{name}:anon")).acquire().await.unwrap());
        tokens.push(client.token_lock(name.as_str()).acquire().await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for guard in &guards {
        assert!(
            guard.is_held(),
            "{}: {:?}",
            guard.owner(),
            guard.lost_reason()
        );
    }
    for token in &tokens {
        assert!(token.is_held(), "{}", token.owner_token());
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
    for token in tokens {
        token.release().await.unwrap();
    }
}

/// A 3-master cluster whose nodes' tracking tables hold one key each.
fn one_key_tracking_cluster() -> Cluster {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    for server in cluster.nodes() {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("tracking-table-max-keys")
            .arg(1)
            .query(&mut server.conn())
            .unwrap();
    }
    cluster
}

/// `client` takes a token lock on each of `names`.
async fn hold_all(client: &Client, names: &[String]) -> Vec<TokenGuard> {
    let mut guards = Vec::new();
    for name in names {
        guards.push(client.token_lock(name.as_str()).acquire().await.unwrap());
    }
    guards
}

/// Calls of `commands` the node at `port` runs in the next 2 s.
async fn calls_in_two_seconds(cluster: &Cluster, port: u16, commands: &[&str]) -> u64 {
    let count = |cluster: &Cluster| -> u64 {
        commands
            .iter()
            .map(|command| command_calls(cluster, port, command))
            .sum()
    };
    let before = count(cluster);
    tokio::time::sleep(Duration::from_secs(2)).await;
    count(cluster) - before
}

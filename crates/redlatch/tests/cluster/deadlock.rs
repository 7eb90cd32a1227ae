//! Deadlock detection on a cluster: locks whose keys share a hash tag are
//! checked (their wait-for edges live in that slot), keys without one are
//! not (a script reaches one slot).

use std::sync::Arc;
use std::time::Duration;

use redlatch::deadlock::Waiting;
use redlatch::{Client, Error};
use tokio::sync::Barrier;

/// Takes `first`, meets the other task, waits for `second` (`wait` at most).
async fn first_then_second(
    client: Client,
    first: &'static str,
    second: &'static str,
    barrier: Arc<Barrier>,
    wait: Duration,
) -> (Result<(), Error>, redlatch::Guard) {
    let held = client.lock(first).acquire().await.expect("first lock");
    barrier.wait().await;
    let outcome = client
        .lock(second)
        .acquire_within(Some(wait))
        .await
        .map(drop);
    (outcome, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_over_keys_of_one_hash_tag_is_refused_to_one_party() {
    let cluster = super::cluster();
    let (a, b) = (detecting(&cluster).await, detecting(&cluster).await);
    let barrier = Arc::new(Barrier::new(2));
    let wait = Duration::from_secs(10);
    let mut one = tokio::spawn(first_then_second(
        a,
        "{dl}:1",
        "{dl}:2",
        barrier.clone(),
        wait,
    ));
    let mut two = tokio::spawn(first_then_second(b, "{dl}:2", "{dl}:1", barrier, wait));
    let ((outcome, held), other) = tokio::select! {
        done = &mut one => (done.unwrap(), two),
        done = &mut two => (done.unwrap(), one),
    };
    let Err(Error::Deadlock { cycle }) = outcome else {
        panic!("not refused: {outcome:?}");
    };
    assert_eq!(cycle.len(), 2, "{cycle:?}");
    drop(held);
    let (outcome, _held) = tokio::time::timeout(wait, other).await.unwrap().unwrap();
    outcome.expect("the other party proceeds");
}

/// Keys without a hash tag (in different slots) are not checked: the
/// waits run out as they would without detection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_without_a_hash_tag_are_not_checked() {
    let cluster = super::cluster();
    let (a, b) = (detecting(&cluster).await, detecting(&cluster).await);
    let barrier = Arc::new(Barrier::new(2));
    let wait = Duration::from_millis(500);
    let one = tokio::spawn(first_then_second(a, "dl-a", "dl-b", barrier.clone(), wait));
    let two = tokio::spawn(first_then_second(b, "dl-b", "dl-a", barrier, wait));
    for done in [one.await.unwrap(), two.await.unwrap()] {
        assert!(matches!(done.0, Err(Error::Timeout { .. })), "{:?}", done.0);
    }
}

/// `Client::waits` walks every master: the edges of waits for locks of
/// eight hash tags (spread over the three masters' slots) are all listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_lists_the_edges_on_every_master() {
    let cluster = super::cluster();
    let (holder, waiter) = (detecting(&cluster).await, detecting(&cluster).await);
    let names: Vec<String> = (0..8).map(|tag| format!("{{dl-w{tag}}}:lock")).collect();
    let mut held = Vec::new();
    for name in &names {
        held.push(holder.lock(name.as_str()).acquire().await.unwrap());
    }
    let tasks: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let (waiter, name) = (waiter.clone(), name.clone());
            tokio::spawn(async move {
                waiter
                    .lock(name.as_str())
                    .with_owner(format!("w{i}"))
                    .acquire_within(Some(Duration::from_secs(30)))
                    .await
            })
        })
        .collect();
    let expected: Vec<Waiting> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Waiting {
            party: format!("n:w{i}"),
            lock: name.clone(),
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut waits = holder.waits().await.unwrap();
    while waits != expected && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waits = holder.waits().await.unwrap();
    }
    assert_eq!(waits, expected);
    drop(held);
    for task in tasks {
        drop(task.await.unwrap().expect("the waiter acquires once freed"));
    }
}

/// A cluster client with deadlock detection turned on (off by default).
async fn detecting(cluster: &testkit::Cluster) -> redlatch::Client {
    super::builder(cluster, Duration::from_secs(30))
        .deadlock_detection(true)
        .connect()
        .await
        .expect("connect to the cluster")
}

/// `Client::waits` during a master's failover: a client connected to one
/// node of the cluster is refused (`Error::ClusterNode`); the cluster
/// client's calls while the master dies end (a typed error or a listing,
/// never a hang or a panic), and once a replica has taken over, every
/// edge (written, and replicated, before) is listed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_goes_on_through_a_master_failover() {
    let mut cluster = super::cluster();
    let client = detecting(&cluster).await;
    let lone = redlatch::Client::builder(&cluster.urls()[0])
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to one node");
    let refused = lone.waits().await;
    assert!(
        matches!(refused, Err(Error::ClusterNode { .. })),
        "{refused:?}"
    );
    let names: Vec<String> = (0..24).map(|tag| format!("{{dl-f{tag}}}:lock")).collect();
    let mut expected = Vec::new();
    {
        let nodes = cluster.urls();
        let plain = redis::cluster::ClusterClient::new(nodes).unwrap();
        let mut conn = plain.get_async_connection().await.unwrap();
        for (i, name) in names.iter().enumerate() {
            let tag = &name[1..name.find('}').unwrap()];
            let key = redlatch::deadlock::wait_key("", &format!("n:f{i}"), Some(tag));
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg(name)
                .query_async(&mut conn)
                .await
                .unwrap();
            // Replicated before the master dies.
            let _: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(5000)
                .query_async(&mut conn)
                .await
                .unwrap_or(0);
            expected.push(Waiting {
                party: format!("n:f{i}"),
                lock: name.clone(),
            });
        }
    }
    expected.sort();
    assert_eq!(client.waits().await.unwrap(), expected);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let walker = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let outcome = tokio::time::timeout(Duration::from_secs(30), client.waits())
                    .await
                    .expect("Client::waits hangs during a failover");
                seen.push(outcome.map(|waits| waits.len()).map_err(|e| e.to_string()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            seen
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victim = names[0].clone();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.kill_master_of(&victim).expect("a failover");
        cluster
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = walker.await.unwrap();
    let mut outcomes = seen.clone();
    outcomes.dedup();
    eprintln!("during the failover ({} calls): {outcomes:?}", seen.len());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut last = client.waits().await;
    while last.as_ref().ok() != Some(&expected) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        last = client.waits().await;
    }
    assert_eq!(
        last.as_ref().ok(),
        Some(&expected),
        "after the failover: {last:?}"
    );
    drop(cluster);
}

/// A cluster whose nodes announce a hostname as their preferred endpoint
/// (`cluster-preferred-endpoint-type hostname`, Redis 7: what clients
/// connect to): `CLUSTER SLOTS` names the nodes by hostname, `CLUSTER
/// NODES` by IP first. The walk must reach every master all the same, for
/// `Client::waits` and for `Client::locks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_and_locks_on_a_cluster_that_announces_hostnames() {
    let cluster = testkit::Cluster::start_with_args(
        3,
        0,
        &[
            ("cluster-announce-hostname", "localhost"),
            ("cluster-preferred-endpoint-type", "hostname"),
        ],
    )
    .expect("start a 3-master cluster announcing hostnames");
    let holder = detecting(&cluster).await;
    let waiter = detecting(&cluster).await;
    let held = holder.lock("{dl-h}:lock").acquire().await.unwrap();
    let waiting = tokio::spawn(async move {
        waiter
            .lock("{dl-h}:lock")
            .with_owner("w")
            .acquire_within(Some(Duration::from_secs(30)))
            .await
            .map(drop)
    });
    let expected = vec![Waiting {
        party: "n:w".to_owned(),
        lock: "{dl-h}:lock".to_owned(),
    }];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut waits = holder.waits().await;
    while waits.as_ref().ok() != Some(&expected) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waits = holder.waits().await;
    }
    let locks = holder.locks("").await.map(|locks| {
        locks
            .into_iter()
            .map(|status| status.name)
            .collect::<Vec<_>>()
    });
    eprintln!("waits: {waits:?}; locks: {locks:?}");
    drop(held);
    waiting
        .await
        .unwrap()
        .expect("the waiter acquires once freed");
    assert_eq!(waits.as_ref().ok(), Some(&expected), "{waits:?}");
    assert_eq!(
        locks.as_ref().ok(),
        Some(&vec!["{dl-h}:lock".to_owned()]),
        "{locks:?}"
    );
}

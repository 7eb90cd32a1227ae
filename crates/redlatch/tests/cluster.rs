//! Locks on a Redis Cluster (3 masters, 1 replica each): keys of a lock in
//! one slot, sharded pub/sub wake-ups, and a master failover during use.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redlatch::{Client, ClientBuilder, Error};
use testkit::Cluster;

fn cluster() -> Cluster {
    Cluster::start(3, 1).expect("start a 3-master cluster (redis-server and redis-cli installed?)")
}

async fn client(cluster: &Cluster, lease: Duration) -> Client {
    ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .default_lease(lease)
        .connect()
        .await
        .expect("connect to the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_many_names_spread_over_every_master_exclude_and_stay_renewed() {
    let cluster = cluster();
    // A 1 s lease: the watchdog renews every ~333 ms, in per-slot batches.
    let first = client(&cluster, Duration::from_secs(1)).await;
    let second = client(&cluster, Duration::from_secs(1)).await;

    let names: Vec<String> = (0..48).map(|i| format!("order:{i}")).collect();
    let masters: BTreeSet<u16> = names
        .iter()
        .map(|name| cluster.master_of(name).expect("master of a name"))
        .collect();
    assert_eq!(masters.len(), 3, "the names should land on every master");

    let mut guards = Vec::new();
    for name in &names {
        let guard = first.lock(name.as_str()).try_acquire().await.unwrap();
        guards.push(guard.expect("a free lock is acquired"));
    }
    // Held for 2.5 leases: only renewals (which may not mix slots) keep them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (name, guard) in names.iter().zip(&guards) {
        assert!(guard.is_held(), "{name} was lost: renewals failed");
        let taken = second.lock(name.as_str()).try_acquire().await.unwrap();
        assert!(taken.is_none(), "{name} was acquired twice");
    }
    let listed = first.locks("order:").await.unwrap();
    assert_eq!(listed.len(), names.len(), "listing walks every master");
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert!(first.locks("order:").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_through_sharded_pub_sub() {
    let cluster = cluster();
    let first = client(&cluster, Duration::from_secs(30)).await;
    let second = client(&cluster, Duration::from_secs(30)).await;
    let lock = first.lock("order:7");
    let guard = lock
        .acquire_with_lease(Duration::from_secs(30))
        .await
        .unwrap();

    // A waiter on another client is woken by the release (SSUBSCRIBE /
    // SPUBLISH), long before the 30 s lease would end.
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move {
            second
                .lock("order:7")
                .acquire_timeout(Duration::from_secs(15))
                .await
        })
    };
    let subscribed = async {
        loop {
            if lock.status().await.unwrap().waiting_clients > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), subscribed)
        .await
        .expect("the waiter subscribes to the lock's shard channel");
    guard.release().await.unwrap();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the lock after the release");
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_whose_braces_would_split_the_slot_are_refused() {
    let cluster = cluster();
    let client = client(&cluster, Duration::from_secs(30)).await;
    for name in ["order:{42}", "a}b"] {
        match client.lock(name).try_acquire().await {
            Err(Error::InvalidName { reason, .. }) => assert!(reason.contains("hash slot")),
            other => panic!("{name}: expected InvalidName, got {other:?}"),
        }
    }
    // Braces that keep every key in one slot are fine ("x{" has no closing brace).
    let guard = client.lock("x{").try_acquire().await.unwrap();
    guard.expect("free").release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_keeps_a_replicated_lock_and_the_client_working() {
    let mut cluster = cluster();
    // The replica must have the lock before its master dies: WAIT for it.
    let holder = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .retries(5)
        .default_lease(Duration::from_secs(10))
        .wait_for_replicas(1, Duration::from_secs(2))
        .connect()
        .await
        .expect("connect");
    let other = client(&cluster, Duration::from_secs(10)).await;

    let guard = holder.lock("job:failover").acquire().await.unwrap();
    let token = guard.token();
    let old = cluster.master_of("job:failover").unwrap();
    let new = tokio::task::spawn_blocking(move || {
        let new = cluster.kill_master_of("job:failover");
        (cluster, new)
    });
    let (cluster, new) = new.await.unwrap();
    let new = new.expect("a replica takes over");
    assert_ne!(old, new);

    // The lock survived on the promoted replica; the other client still
    // cannot take it, and the holder's guard was not lost.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        match other.lock("job:failover").status().await {
            Ok(status) => break status,
            Err(error) if error.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("status after failover: {error}"),
        }
    };
    assert!(
        status.held,
        "the replicated lock is still held after failover"
    );
    assert_eq!(status.last_token, Some(token));
    assert!(
        other
            .lock("job:failover")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(guard.is_held());

    // A waiter subscribed after the failover is woken by a release on the new master.
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .lock("job:failover")
                .acquire_timeout(Duration::from_secs(8))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the waiter gets the lock");
    assert!(next.token() > token, "fencing tokens keep increasing");
    next.release().await.unwrap();

    // The promoted master has no replica left: the holder, which asks for
    // one, is refused there, and its acquisition undone.
    match holder.lock("job:failover").try_acquire().await {
        Err(Error::ReplicasNotConfirmed {
            acknowledged: 0,
            wanted: 1,
            ..
        }) => {}
        other => panic!("expected ReplicasNotConfirmed, got {other:?}"),
    }
    let free = other.lock("job:failover").try_acquire().await.unwrap();
    free.expect("the unconfirmed acquisition was undone")
        .release()
        .await
        .unwrap();

    // New locks on every slot work, the failed-over one included.
    let mut masters = BTreeSet::new();
    for i in 0..24 {
        let name = format!("after:{i}");
        masters.insert(cluster.master_of(&name).unwrap());
        let guard = other
            .lock(name.as_str())
            .acquire_timeout(Duration::from_secs(5))
            .await;
        guard.unwrap().release().await.unwrap();
    }
    assert!(
        masters.contains(&new),
        "some names live on the promoted master"
    );
}

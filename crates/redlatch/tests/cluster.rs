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

    // The other primitives' keys and channels follow the same rule.
    let refused = |what: &str, outcome: redlatch::Result<()>| match outcome {
        Err(Error::InvalidName { reason, .. }) => assert!(reason.contains("hash slot"), "{what}"),
        other => panic!("{what}: expected InvalidName, got {other:?}"),
    };
    let name = "order:{42}";
    let fair = client.fair_lock(name).try_acquire().await;
    refused("fair lock", fair.map(drop));
    let read = client.read_write_lock(name).try_read().await;
    refused("read lock", read.map(drop));
    let write = client.read_write_lock(name).try_write().await;
    refused("write lock", write.map(drop));
    refused(
        "semaphore",
        client.semaphore(name).add_permits(1).await.map(drop),
    );
    let permits = client.permit_semaphore(name).available_permits().await;
    refused("permit semaphore", permits.map(drop));
    assert!(
        client
            .fair_lock("x{")
            .try_acquire()
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(client.semaphore("pool{").add_permits(1).await.unwrap(), 1);
}

/// A plain connection to the master that serves `key`'s slot.
fn master_conn(cluster: &Cluster, key: &str) -> redis::Connection {
    let port = cluster.master_of(key).expect("master of the key");
    let node = cluster.nodes().iter().find(|node| node.port() == port);
    node.expect("the master is a node of the cluster").conn()
}

/// Waits (up to 10 s) until `ready` answers true, asking every 10 ms.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How long a woken waiter may take to get the lock after the release: far
/// more than a hand-off needs on a loaded machine, far less than the 30 s
/// leases and 60 s place leases after which a waiter retries unprompted.
const PROMPT_WAKE: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_read_write_releases_wake_waiters_through_sharded_pub_sub() {
    let cluster = cluster();
    let first = client(&cluster, Duration::from_secs(30)).await;
    let second = client(&cluster, Duration::from_secs(30)).await;
    let lease = Duration::from_secs(30);

    // Fair lock: the release SPUBLISHes to the first waiter's own channel.
    let holder = first.fair_lock("queue:9").with_lease(lease);
    let guard = holder.acquire().await.unwrap();
    let waiter = {
        let lock = second
            .fair_lock("queue:9")
            .with_lease(lease)
            .with_place_lease(Duration::from_secs(60));
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(25)).await })
    };
    let mut conn = master_conn(&cluster, "queue:9");
    until("the fair waiter is in line and subscribed", || {
        let line: i64 = redis::cmd("LLEN")
            .arg("redisson_lock_queue:{queue:9}")
            .query(&mut conn)
            .unwrap();
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("SHARDCHANNELS")
            .arg("redisson_lock__channel:{queue:9}:*")
            .query(&mut conn)
            .unwrap();
        line == 1 && !channels.is_empty()
    })
    .await;
    guard.release().await.unwrap();
    let released = Instant::now();
    let next = waiter
        .await
        .unwrap()
        .expect("the fair waiter gets the lock");
    let woke = released.elapsed();
    assert!(woke < PROMPT_WAKE, "fair waiter woken after {woke:?}");
    eprintln!("fair waiter woken {woke:?} after the release on a cluster");
    next.release().await.unwrap();

    // Read-write lock: a reader waits out a writer and is woken by its release.
    let writer = first.read_write_lock("doc:3").with_lease(lease);
    let write = writer.write().await.unwrap();
    let reader = {
        let lock = second.read_write_lock("doc:3").with_lease(lease);
        tokio::spawn(async move { lock.read_timeout(Duration::from_secs(25)).await })
    };
    let mut conn = master_conn(&cluster, "doc:3");
    until("the reader is subscribed", || {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg("redisson_rwlock:{doc:3}")
            .query(&mut conn)
            .unwrap();
        counts.first().is_some_and(|(_, count)| *count > 0)
    })
    .await;
    write.release().await.unwrap();
    let released = Instant::now();
    let read = reader.await.unwrap().expect("the reader gets the lock");
    let woke = released.elapsed();
    assert!(woke < PROMPT_WAKE, "reader woken after {woke:?}");
    eprintln!("reader woken {woke:?} after the release on a cluster");
    read.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_releases_are_published_on_the_shard_channel() {
    let cluster = cluster();
    let client = client(&cluster, Duration::from_secs(30)).await;
    // Semaphore waiters also re-check every second, so a wake-up cannot be
    // told from a re-check by timing: listen on the shard channel instead.
    let mut conn = master_conn(&cluster, "pool:5");
    redis::cmd("SSUBSCRIBE")
        .arg("redisson_sc:{pool:5}")
        .exec(&mut conn)
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut next_message = || -> Vec<String> {
        let reply = conn
            .recv_response()
            .expect("a message on the shard channel");
        redis::from_redis_value(reply).unwrap()
    };

    let semaphore = client.semaphore("pool:5");
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert_eq!(next_message(), ["smessage", "redisson_sc:{pool:5}", "1"]);
    let permit = semaphore.acquire(1).await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(next_message(), ["smessage", "redisson_sc:{pool:5}", "1"]);
    semaphore.add_permits(2).await.unwrap();
    assert_eq!(next_message(), ["smessage", "redisson_sc:{pool:5}", "3"]);

    // The expirable-permit semaphore of the same name shares the channel.
    let permits = client.permit_semaphore("pool:5");
    let permit = permits.acquire().await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(next_message(), ["smessage", "redisson_sc:{pool:5}", "3"]);
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

//! Locks on a Redis Cluster (3 masters, 1 replica each): keys of a lock in
//! one slot, sharded pub/sub wake-ups (or plain ones, when set so), and a
//! master failover during use.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redlatch::{Client, ClientBuilder, ClusterPubSub, Error};
use testkit::Cluster;

/// The counts' try-sets and adds cut off in flight.
#[path = "cluster/counts_cut_off.rs"]
mod counts_cut_off;
/// Deadlock detection over keys of one hash tag.
#[path = "cluster/deadlock.rs"]
mod deadlock;
/// Names made into primitives by handle::<P> and by their factories.
#[path = "cluster/handle_names.rs"]
mod handle_names;
/// The loss watch on a cluster.
#[path = "cluster/loss_watch.rs"]
mod loss_watch;
/// Token lock waiters on a cluster under strain.
#[path = "cluster/token_waiter_faults.rs"]
mod token_waiter_faults;

fn cluster() -> Cluster {
    Cluster::start(3, 1).expect("start a 3-master cluster (redis-server and redis-cli installed?)")
}

async fn client(cluster: &Cluster, lease: Duration) -> Client {
    builder(cluster, lease)
        .connect()
        .await
        .expect("connect to the cluster")
}

/// The test client's settings, before it connects.
fn builder(cluster: &Cluster, lease: Duration) -> ClientBuilder {
    ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .default_lease(lease)
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
        .clone()
        .with_lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();

    // A waiter on another client is woken by the release (SSUBSCRIBE /
    // SPUBLISH), long before the 30 s lease would end.
    let waiter = {
        let second = second.clone();
        tokio::spawn(async move {
            second
                .lock("order:7")
                .acquire_within(Some(Duration::from_secs(15)))
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

/// With `ClusterPubSub::Plain`, as for Redisson clients running with
/// `shardedSubscriptionMode = OFF`: a plain PUBLISH of Redisson's unlock
/// wakes a redlatch waiter, and redlatch's release reaches a plain
/// subscriber on a node that does not own the lock's slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_pub_sub_meets_redisson_clients_that_do_not_shard() {
    let cluster = cluster();
    let client = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .cluster_pubsub(ClusterPubSub::Plain)
        .connect()
        .await
        .expect("connect to the cluster");
    let name = "order:9";
    let channel = "redisson_lock__channel:{order:9}";
    let mut owner = master_conn(&cluster, name);
    // A Redisson thread holds the lock for 30 s.
    let () = redis::cmd("HSET")
        .arg(name)
        .arg("2f3a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b:1")
        .arg(1)
        .query(&mut owner)
        .unwrap();
    let () = redis::cmd("PEXPIRE")
        .arg(name)
        .arg(30_000)
        .query(&mut owner)
        .unwrap();
    let lock = client.lock(name);
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_within(Some(Duration::from_secs(20))).await }
    });
    let subscribed = async {
        while lock.status().await.unwrap().waiting_clients == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), subscribed)
        .await
        .expect("the waiter subscribes to the plain channel");
    // Redisson's unlock without sharding: DEL, then a plain PUBLISH of 0.
    let () = redis::cmd("DEL").arg(name).query(&mut owner).unwrap();
    let unlocked_at = Instant::now();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg(0)
        .query(&mut owner)
        .unwrap();
    let guard = tokio::time::timeout(PROMPT_WAKE, waiter)
        .await
        .expect("the plain unlock message wakes the waiter, not the 30 s lease")
        .unwrap()
        .unwrap();
    assert!(unlocked_at.elapsed() < PROMPT_WAKE);

    // A plain subscriber on another node hears redlatch's release.
    let port = cluster.master_of(name).unwrap();
    let elsewhere = cluster
        .nodes()
        .iter()
        .find(|node| node.port() != port)
        .expect("another node");
    let mut listener = elsewhere.conn();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let heard = tokio::task::spawn_blocking(move || {
        let mut pubsub = listener.as_pubsub();
        pubsub.subscribe(channel).unwrap();
        // The first message after the subscription is confirmed.
        pubsub
            .get_message()
            .map(|message| message.get_channel_name().to_owned())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.release().await.unwrap();
    let heard = heard.await.unwrap().expect("a message within 5 s");
    assert_eq!(heard, channel);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_whose_braces_would_split_the_slot_are_refused() {
    let cluster = cluster();
    let client = client(&cluster, Duration::from_secs(30)).await;
    // A `{` with no tag after it, or a lone `}`: the key hashes whole, the
    // names derived from it do not.
    for name in ["x{", "a}b"] {
        match client.lock(name).try_acquire().await {
            Err(Error::InvalidName { reason, .. }) => assert!(reason.contains("hash slot")),
            other => panic!("{name}: expected InvalidName, got {other:?}"),
        }
    }
    let refused = |what: &str, outcome: redlatch::Result<()>| match outcome {
        Err(Error::InvalidName { reason, .. }) => assert!(reason.contains("hash slot"), "{what}"),
        other => panic!("{what}: expected InvalidName, got {other:?}"),
    };
    let name = "x{";
    refused(
        "fair lock",
        client.fair_lock(name).try_acquire().await.map(drop),
    );
    refused(
        "read lock",
        client.read_write_lock(name).try_read().await.map(drop),
    );
    refused(
        "write lock",
        client.read_write_lock(name).try_write().await.map(drop),
    );
    refused(
        "semaphore",
        client.semaphore(name).add_permits(1).await.map(drop),
    );
    let permits = client.permit_semaphore(name).available_permits().await;
    refused("permit semaphore", permits.map(drop));

    // A hash tag of the name's own is kept in every derived name (as
    // Redisson derives them), so every primitive works on it.
    let name = "order:{42}";
    let guard = client.lock(name).try_acquire().await.unwrap();
    guard.expect("free").release().await.unwrap();
    let fair = client.fair_lock(name).try_acquire().await.unwrap();
    fair.expect("free").release().await.unwrap();
    let read = client.read_write_lock(name).try_read().await.unwrap();
    read.expect("free").release().await.unwrap();
    let write = client.read_write_lock(name).try_write().await.unwrap();
    write.expect("free").release().await.unwrap();
    assert_eq!(client.semaphore(name).add_permits(1).await.unwrap(), 1);
    let expirable = client.permit_semaphore(name);
    expirable.add_permits(1).await.unwrap();
    let permit = expirable.try_acquire().await.unwrap().expect("a permit");
    permit.release().await.unwrap();
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
        tokio::spawn(async move { lock.acquire_within(Some(Duration::from_secs(25))).await })
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
        tokio::spawn(async move { lock.read_within(Some(Duration::from_secs(25))).await })
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
    let permit = semaphore.acquire().await.unwrap();
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

/// A count-down latch on a cluster: its zero-count message is SPUBLISHed on
/// the key's shard, where a waiter of another client hears it; a name with
/// braces (which Redisson's channel, `...__{KEY}`, would split from its key)
/// is refused before any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_opens_for_waiters_through_sharded_pub_sub() {
    let cluster = cluster();
    let first = client(&cluster, Duration::from_secs(30)).await;
    let second = client(&cluster, Duration::from_secs(30)).await;
    let channel = "redisson_countdownlatch__channel__{deploy:12}";
    let mut observer = master_conn(&cluster, "deploy:12");
    redis::cmd("SSUBSCRIBE")
        .arg(channel)
        .exec(&mut observer)
        .unwrap();
    observer
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut next_message = || -> Vec<String> {
        let reply = observer
            .recv_response()
            .expect("a message on the shard channel");
        redis::from_redis_value(reply).unwrap()
    };

    let latch = first.count_down_latch("deploy:12");
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(next_message(), ["smessage", channel, "1"]);
    let waiter = {
        let latch = second.count_down_latch("deploy:12");
        tokio::spawn(async move { latch.await_zero().await })
    };
    let mut conn = master_conn(&cluster, "deploy:12");
    until("the waiter is subscribed", || {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query(&mut conn)
            .unwrap();
        counts.first().is_some_and(|(_, count)| *count > 1)
    })
    .await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "returned at 1");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(next_message(), ["smessage", channel, "0"]);
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter returned")
        .unwrap()
        .unwrap();
    assert_eq!(
        second.count_down_latch("deploy:12").count().await.unwrap(),
        0
    );

    for name in ["order:{42}", "a}b"] {
        match first.count_down_latch(name).try_set_count(1).await {
            Err(Error::InvalidName { reason, .. }) => assert!(reason.contains("hash slot")),
            other => panic!("{name}: expected InvalidName, got {other:?}"),
        }
    }
    // A `{` with no tag after it: key and channel hash alike (the channel's
    // tag is the whole key), so the latch works there.
    let open_brace = first.count_down_latch("x{");
    assert!(open_brace.try_set_count(1).await.unwrap());
    assert_eq!(open_brace.count_down().await.unwrap(), 0);
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
                .acquire_within(Some(Duration::from_secs(8)))
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
            .acquire_within(Some(Duration::from_secs(5)))
            .await;
        guard.unwrap().release().await.unwrap();
    }
    assert!(
        masters.contains(&new),
        "some names live on the promoted master"
    );
}

// ---------------------------------------------------------------------------
// Calls cut off in flight: the script ran, its reply was lost with the
// connection. A script that is not idempotent must not be sent again, and
// the caller must learn what happened (or that it cannot know).

/// How long the master sleeps while a call's script waits in its socket.
const MASTER_SLEEP: Duration = Duration::from_millis(500);

/// How many calls each test below cuts off.
const CUT_OFF_ROUNDS: usize = 5;

/// A 3-master cluster without replicas whose nodes accept `DEBUG SLEEP`.
fn debug_cluster() -> Cluster {
    Cluster::start_with_args(3, 0, &[("enable-debug-command", "yes")])
        .expect("start a 3-master cluster (redis-server and redis-cli installed?)")
}

/// A client that waits 5 s for an answer (far longer than [`MASTER_SLEEP`])
/// and retries `retries` times after a broken connection.
async fn patient_client(cluster: &Cluster, retries: u32) -> Client {
    ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(5))
        .retries(retries)
        .retry_delay(Duration::from_millis(50))
        .default_lease(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect to the cluster")
}

/// The node that is master of `key`'s slot.
fn master_node<'a>(cluster: &'a Cluster, key: &str) -> &'a testkit::RedisServer {
    let port = cluster.master_of(key).expect("master of the key");
    let node = cluster.nodes().iter().find(|node| node.port() == port);
    node.expect("the master is a node of the cluster")
}

/// The connections to `port` (`/proc/net/tcp`): remote port → bytes the
/// server has received and not read yet.
fn connections_to(port: u16) -> std::collections::BTreeMap<u16, u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let port_of = |address: &str| {
        let hex = address.rsplit_once(':')?.1;
        u16::from_str_radix(hex, 16).ok()
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = port_of(fields.get(1)?)?;
            let remote = port_of(fields.get(2)?)?;
            let unread = fields.get(4)?.split_once(':')?.1;
            let unread = u64::from_str_radix(unread, 16).ok()?;
            // Remote port 0: the listening socket.
            (local == port && remote != 0).then_some((remote, unread))
        })
        .collect()
}

/// A master put to sleep by `DEBUG SLEEP` for [`MASTER_SLEEP`].
struct Asleep {
    port: u16,
    /// Sent the sleep (after `before`, if any); answers it later.
    sleeper: redis::Connection,
    /// A raw connection whose PING went unanswered: the master sleeps.
    probe: std::net::TcpStream,
    since: Instant,
    /// Replies the sleeper awaits.
    replies: usize,
    /// Connections open to the master before the sleep was sent.
    connections: std::collections::BTreeMap<u16, u64>,
}

impl Asleep {
    /// Sends `before` (if any), then `DEBUG SLEEP`, on one connection to
    /// `node`, and returns once a PING goes unanswered.
    fn put(node: &testkit::RedisServer, before: Option<redis::Cmd>) -> Asleep {
        use std::io::{ErrorKind, Read, Write};

        let connections = connections_to(node.port());
        let mut sleeper = node.conn();
        let mut probe = std::net::TcpStream::connect(node.addr()).expect("connect a probe");
        probe
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let replies = 1 + usize::from(before.is_some());
        let mut packed = before
            .map(|cmd| cmd.get_packed_command())
            .unwrap_or_default();
        packed.extend(
            redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(MASTER_SLEEP.as_secs_f64())
                .get_packed_command(),
        );
        sleeper.send_packed_command(&packed).unwrap();
        let mut reply = [0u8; 64];
        loop {
            probe.write_all(b"PING\r\n").unwrap();
            match probe.read(&mut reply) {
                Ok(read) if read > 0 => continue, // answered before the sleep began
                Err(error)
                    if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    break;
                }
                other => panic!("probing the sleeping master: {other:?}"),
            }
        }
        probe.set_nonblocking(true).unwrap();
        Asleep {
            port: node.port(),
            sleeper,
            probe,
            since: Instant::now(),
            replies,
            connections,
        }
    }

    /// Waits (while the master may still sleep) until a connection that was
    /// open before the sleep was sent, and is not in `seen`, has unread
    /// data: a command queued behind the sleep. Returns its remote port.
    async fn queued_command(&self, seen: &[u16]) -> Option<u16> {
        while self.since.elapsed() < MASTER_SLEEP {
            let queued = connections_to(self.port)
                .into_iter()
                .find(|(remote, unread)| {
                    *unread > 0 && self.connections.contains_key(remote) && !seen.contains(remote)
                });
            if let Some((remote, _)) = queued {
                return Some(remote);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    }

    /// True while the PING sent before the sleep is unanswered.
    fn still(&mut self) -> bool {
        use std::io::{ErrorKind, Read};
        let mut reply = [0u8; 64];
        matches!(self.probe.read(&mut reply), Err(error) if error.kind() == ErrorKind::WouldBlock)
    }

    /// Waits for the master to wake; returns the replies to the commands
    /// sent before the sleep.
    async fn woken(self) -> Vec<redis::Value> {
        let Asleep {
            mut sleeper,
            probe,
            replies,
            ..
        } = self;
        tokio::task::spawn_blocking(move || {
            let replies: redis::RedisResult<Vec<_>> =
                (0..replies).map(|_| sleeper.recv_response()).collect();
            drop(probe);
            replies
        })
        .await
        .unwrap()
        .unwrap_or_default()
    }
}

/// Runs `call`, whose one script goes to the master of `key`, so that the
/// script runs and its reply is lost:
///
/// 1. the master is put to sleep (`DEBUG SLEEP`), and found asleep (a PING
///    goes unanswered);
/// 2. `call` starts; once its script waits, unread, in a socket of the
///    master (`/proc/net/tcp`),
/// 3. `CLIENT KILL TYPE normal` is sent on a connection opened before the
///    sleep, and the PING is found still unanswered: the kill is queued too.
///
/// When the master wakes it reads its sockets in the order data arrived on
/// them: the script runs, then the kill closes every client connection in
/// the same event-loop turn, before replies are written. The script's reply
/// is lost; whatever the caller then does, the script ran once.
///
/// Returns `None` (after the call ended) when the master woke before the
/// script and the kill were both queued, as may happen on a loaded machine:
/// that round proves nothing.
///
/// The caller must have used `key`'s master just before, so the client's
/// connection to it is up (a connection opened during the sleep would not
/// send the script until after the kill) and the script is loaded there.
async fn cut_off_in_flight<T: Send + 'static>(
    cluster: &Cluster,
    key: &str,
    call: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let node = master_node(cluster, key);
    let mut killer = node.conn();
    let mut asleep = Asleep::put(node, None);
    let call = tokio::spawn(call);
    let mut queued = asleep.queued_command(&[]).await.is_some();
    let kill = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .get_packed_command();
    killer.send_packed_command(&kill).unwrap();
    queued &= asleep.still();
    let killed = tokio::task::spawn_blocking(move || killer.recv_response())
        .await
        .unwrap()
        .expect("CLIENT KILL");
    asleep.woken().await;
    let outcome = call.await.unwrap();
    if !queued {
        return None;
    }
    let killed: i64 = redis::from_redis_value(killed).unwrap();
    assert!(killed >= 1, "the kill found no connection to cut");
    Some(outcome)
}

/// Rounds a test may try to get [`CUT_OFF_ROUNDS`] calls cut off: a round
/// in which the master woke too early is tried again.
const MAX_TRIES: usize = 4 * CUT_OFF_ROUNDS;

fn enough_rounds(valid: usize, tries: usize) {
    assert!(
        tries < MAX_TRIES,
        "only {valid} of {tries} calls could be cut off in flight (machine too loaded?)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_release_cut_off_in_flight_gives_its_permit_back_once() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let semaphore = client.semaphore("pool:cut");
    assert!(semaphore.try_set_permits(10).await.unwrap());
    // Loads the scripts on the master.
    let permit = semaphore.acquire().await.unwrap();
    assert_eq!(permit.release().await.unwrap(), 10);

    let (mut valid, mut tries, mut extra) = (0, 0, 0);
    let mut outcomes = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let permit = semaphore.acquire().await.unwrap();
        let outcome = cut_off_in_flight(&cluster, "pool:cut", permit.release()).await;
        let available = semaphore.available_permits().await.unwrap() as i64;
        if available != 10 {
            semaphore.add_permits(10 - available).await.unwrap();
        }
        if let Some(outcome) = outcome {
            valid += 1;
            extra += available - 10;
            outcomes.push(format!("{outcome:?}"));
        }
    }
    assert_eq!(
        extra,
        0,
        "{CUT_OFF_ROUNDS} releases of 1 permit cut off in flight gave back {} permits; \
         the releases answered {outcomes:?}",
        CUT_OFF_ROUNDS as i64 + extra
    );
}

/// A count down cut off in flight is sent again to learn its outcome (the
/// re-send-safe form), and counts down once, never twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_cut_off_in_flight_counts_down_once() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let latch = client.count_down_latch("latch:cut");
    assert!(latch.try_set_count(1_000).await.unwrap());
    // Loads the scripts on the master.
    assert_eq!(latch.count_down().await.unwrap(), 999);

    let (mut valid, mut tries) = (0, 0);
    let mut outcomes = Vec::new();
    let mut expected = 999;
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let call = {
            let latch = latch.clone();
            async move { latch.count_down().await }
        };
        let outcome = cut_off_in_flight(&cluster, "latch:cut", call).await;
        let count = latch.count().await.unwrap();
        assert!(
            count == expected || count + 1 == expected,
            "one count down took the count from {expected} to {count} ({outcome:?})"
        );
        if let Some(outcome) = outcome {
            valid += 1;
            if let Ok(left) = outcome {
                assert_eq!(left, count, "the count down's answer is the count");
            }
            outcomes.push(format!("{outcome:?}"));
        }
        expected = count;
    }
    eprintln!("count downs cut off in flight answered {outcomes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentered_release_cut_off_in_flight_leaves_the_outer_hold_exclusive() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let other = patient_client(&cluster, 3).await;
    let lock = client.lock("job:reentered");
    let outer = lock.acquire().await.unwrap();
    outer.reenter().await.unwrap().release().await.unwrap();
    outer.release().await.unwrap();

    let (mut valid, mut tries, mut two_holders) = (0, 0, 0);
    let mut outcomes = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let outer = lock.acquire().await.unwrap();
        let inner = outer.reenter().await.unwrap();
        assert_eq!(lock.status().await.unwrap().holders[0].count, 2);
        let outcome = cut_off_in_flight(&cluster, "job:reentered", inner.release()).await;
        // The outer guard says it holds the lock: nobody else may take it.
        let taken = other.lock("job:reentered").try_acquire().await.unwrap();
        if let Some(outcome) = outcome {
            valid += 1;
            outcomes.push(format!("{outcome:?}"));
            if outer.is_held() && taken.is_some() {
                two_holders += 1;
            }
        }
        if let Some(taken) = taken {
            taken.release().await.unwrap();
        }
        let _ = outer.release().await;
        lock.force_unlock().await.unwrap();
    }
    assert_eq!(
        two_holders, 0,
        "in {two_holders} of {CUT_OFF_ROUNDS} rounds another client took the lock while the \
         outer guard still reported is_held(), after the re-entered hold's release was cut \
         off in flight (it answered {outcomes:?})"
    );
}

/// Waits up to 2 s for the lock to be free; false if it stays held.
async fn freed(lock: &redlatch::Lock) -> bool {
    let free = async {
        loop {
            if let Ok(status) = lock.status().await
                && !status.held
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), free)
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_cut_off_in_flight_takes_one_hold_and_its_release_frees_the_lock() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let lock = client.lock("job:acquired");
    lock.acquire().await.unwrap().release().await.unwrap();

    let (mut valid, mut tries, mut doubled, mut left_held) = (0, 0, 0, 0);
    let mut counts = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let acquiring = {
            let lock = lock.clone();
            async move { lock.acquire().await }
        };
        let outcome = cut_off_in_flight(&cluster, "job:acquired", acquiring).await;
        let holds = lock
            .status()
            .await
            .unwrap()
            .holders
            .first()
            .map(|h| h.count);
        let guard = match outcome {
            Some(Ok(guard)) => Some(guard),
            // Not acquired: whatever the attempt took must be given back.
            Some(Err(error)) => {
                counts.push(format!("{error}"));
                None
            }
            None => {
                lock.force_unlock().await.unwrap();
                continue;
            }
        };
        valid += 1;
        if let Some(guard) = guard {
            counts.push(format!("{holds:?}"));
            doubled += usize::from(holds != Some(1));
            guard.release().await.unwrap();
        }
        if !freed(&lock).await {
            left_held += 1;
            lock.force_unlock().await.unwrap();
        }
    }
    assert!(
        doubled == 0 && left_held == 0,
        "{CUT_OFF_ROUNDS} acquires cut off in flight: the holds counted after each were \
         {counts:?} (each acquire took one); {doubled} had more than one hold, and in \
         {left_held} rounds the lock was still held 2 s after the guard's release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_cut_off_with_retries_off_gives_its_hold_back() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 0).await;
    let lock = client.lock("job:no-retries");
    lock.acquire().await.unwrap().release().await.unwrap();

    let (mut valid, mut tries, mut left_held) = (0, 0, 0);
    let mut outcomes = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        // The connection cut in the last round comes back on first use.
        while lock.status().await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let acquiring = {
            let lock = lock.clone();
            async move { lock.try_acquire().await }
        };
        let outcome = cut_off_in_flight(&cluster, "job:no-retries", acquiring).await;
        let counted = outcome.is_some();
        if let Some(outcome) = &outcome {
            valid += 1;
            outcomes.push(format!("{outcome:?}"));
        }
        if let Some(Ok(Some(guard))) = outcome {
            guard.release().await.unwrap();
        }
        // Whatever the attempt took is given back (docs/SAFETY.md), not left
        // for its 30 s lease.
        if !freed(&lock).await {
            left_held += usize::from(counted);
            lock.force_unlock().await.unwrap();
        }
    }
    assert_eq!(
        left_held, 0,
        "with retries off, {left_held} of {CUT_OFF_ROUNDS} acquires cut off in flight left \
         their hold in place (the acquires answered {outcomes:?})"
    );
}

/// An honest answer from a release that took effect: `Ok`, or an error that
/// says its outcome is unknown. Not `Unavailable` (as if it never reached
/// Redis) nor `NotHeld` (as if someone else had freed the lock).
fn honest_release_outcome(outcome: &redlatch::Result<()>) -> bool {
    match outcome {
        Ok(()) => true,
        Err(Error::Unavailable { .. } | Error::NotHeld { .. }) => false,
        Err(other) => other.to_string().contains("unknown"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_lost_reports_success_or_an_unknown_outcome() {
    let cluster = debug_cluster();
    let mut dishonest = Vec::new();
    let mut released = 0;
    // Without retries, and with them.
    for retries in [0, 3] {
        let client = patient_client(&cluster, retries).await;
        let lock = client.lock("job:outcome");
        lock.acquire().await.unwrap().release().await.unwrap();
        let (mut valid, mut tries) = (0, 0);
        while valid < 3 {
            enough_rounds(valid, tries);
            tries += 1;
            let guard = loop {
                // The connection cut in the last round comes back on first use.
                if let Ok(guard) = lock.acquire().await {
                    break guard;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let outcome = cut_off_in_flight(&cluster, "job:outcome", guard.release()).await;
            let held = loop {
                if let Ok(status) = lock.status().await {
                    break status.held;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let Some(outcome) = outcome else {
                lock.force_unlock().await.unwrap();
                continue;
            };
            valid += 1;
            if held {
                // The release did not run: an error is the truth then.
                lock.force_unlock().await.unwrap();
                continue;
            }
            released += 1;
            if !honest_release_outcome(&outcome) {
                dishonest.push(format!("retries {retries}: {outcome:?}"));
            }
        }
    }
    assert!(released > 0, "no cut-off release took effect");
    assert!(
        dishonest.is_empty(),
        "{} of {released} releases that freed the lock but lost their reply said otherwise: \
         {dishonest:#?}",
        dishonest.len()
    );
}

// ---------------------------------------------------------------------------
// Wake-ups across a dropped subscription, and permit renewals across slots.

/// `PUBSUB SHARDNUMSUB` of one channel.
fn shard_subscribers(conn: &mut redis::Connection, channel: &str) -> i64 {
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    counts.first().map_or(0, |(_, count)| *count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_subscription_drops_is_woken_by_the_next_release() {
    let cluster = debug_cluster();
    let holder = client(&cluster, Duration::from_secs(30)).await;
    let waiting = client(&cluster, Duration::from_secs(30)).await;
    let name = "resubscribe:lock";
    let channel = "redisson_lock__channel:{resubscribe:lock}";
    // Loads both clients' scripts on the master.
    for client in [&holder, &waiting] {
        let guard = client.lock(name).acquire().await.unwrap();
        guard.release().await.unwrap();
    }
    let node = master_node(&cluster, name);
    let mut conn = node.conn();
    let lease = Duration::from_secs(20);
    let rounds = 3;
    let (mut wakes, mut in_window) = (Vec::new(), 0);
    for _ in 0..rounds {
        let guard = holder.lock(name).with_lease(lease).acquire().await.unwrap();
        let waiter = {
            let lock = waiting.lock(name);
            tokio::spawn(async move { lock.acquire_within(Some(Duration::from_secs(40))).await })
        };
        until("the waiter is subscribed", || {
            shard_subscribers(&mut conn, channel) > 0
        })
        .await;
        // Its attempt after subscribing is done: the waiter is parked.
        tokio::time::sleep(Duration::from_millis(300)).await;

        // Cut the waiter's subscription and put the master to sleep at once:
        // no new subscription can be made before it wakes. The release is
        // queued meanwhile, so it runs as soon as the master wakes, before
        // any new subscription. Today the disconnection wakes the waiter
        // at once: its attempt, queued first, still finds the lock held, and
        // it parks again; the unlock message finds nobody subscribed.
        let mut kill = redis::cmd("CLIENT");
        kill.arg("KILL").arg("TYPE").arg("pubsub");
        let mut asleep = Asleep::put(node, Some(kill));
        let retried = asleep.queued_command(&[]).await;
        let release = tokio::spawn(guard.release());
        let release_queued = asleep.queued_command(retried.as_slice()).await.is_some();
        in_window += usize::from(retried.is_some() && release_queued && asleep.still());
        let replies = asleep.woken().await;
        assert!(
            matches!(replies.first(), Some(redis::Value::Int(killed)) if *killed >= 1),
            "the waiter's subscription is cut: {replies:?}"
        );
        release.await.unwrap().unwrap();
        let released = Instant::now();
        let mut waiter = waiter;
        match tokio::time::timeout(PROMPT_WAKE, &mut waiter).await {
            Ok(joined) => {
                joined.unwrap().unwrap().release().await.unwrap();
                wakes.push(format!("{:?}", released.elapsed()));
            }
            Err(_) => {
                waiter.abort();
                wakes.push(format!("not within {PROMPT_WAKE:?}"));
            }
        }
    }
    let late = wakes.iter().filter(|wake| wake.starts_with("not")).count();
    assert_eq!(
        late, 0,
        "{late} of {rounds} waiters whose subscription dropped were not woken by the \
         release that followed (holder's lease {lease:?}); they got the lock after the \
         release: {wakes:?} (in {in_window} rounds the waiter tried the lock and the release \
         was queued while the master slept)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_of_semaphores_on_every_master_stay_renewed() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    // A 1 s lease, renewed every ~333 ms: the permits below fall due together.
    let keeping = client(&cluster, Duration::from_secs(1)).await;
    let other = client(&cluster, Duration::from_secs(1)).await;
    let names: Vec<String> = (0..6).map(|i| format!("workers:{i}")).collect();
    let masters: BTreeSet<u16> = names
        .iter()
        .map(|name| cluster.master_of(name).expect("master of a name"))
        .collect();
    assert_eq!(masters.len(), 3, "the names should land on every master");

    let mut permits = Vec::new();
    for name in &names {
        let semaphore = keeping.permit_semaphore(name.as_str());
        assert!(semaphore.try_set_permits(1).await.unwrap());
        let permit = semaphore.try_acquire().await.unwrap();
        permits.push(permit.expect("a free permit is taken"));
    }
    // 3.5 leases: only renewals keep the permits.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let mut lost = Vec::new();
    for (name, permit) in names.iter().zip(&permits) {
        let resolved = tokio::time::timeout(Duration::ZERO, permit.lost())
            .await
            .is_ok();
        let taken = other
            .permit_semaphore(name.as_str())
            .try_acquire()
            .await
            .unwrap();
        if !permit.is_held() || resolved || taken.is_some() {
            lost.push(format!(
                "{name}: held {}, lost {resolved} ({:?}), taken by another client {}",
                permit.is_held(),
                permit.lost_reason(),
                taken.is_some()
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} permits (semaphores on {} masters) were lost within 3.5 leases: {lost:#?}",
        lost.len(),
        names.len(),
        masters.len()
    );
    for permit in permits {
        permit.release().await.unwrap();
    }
}

/// How many times `FUNCTION LOAD` compiled a library on `node`: its calls
/// that succeeded (`INFO commandstats`); a load of a library already there
/// fails at once, before compiling anything.
fn library_compiles(node: &testkit::RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.conn())
        .expect("INFO commandstats");
    let Some(line) = info
        .lines()
        .find(|line| line.starts_with("cmdstat_function|load:"))
    else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        line.split([':', ','])
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    field("calls") - field("failed_calls") - field("rejected_calls")
}

/// A fleet that connects (a restart of every app instance) costs each
/// master one compile of the library, not one per client: a client loads
/// it only where it is missing. A master that lost it (a new node,
/// `FUNCTION FLUSH`) gets it again at the first call that needs it, and
/// only that master compiles. (Every connect used to send `FUNCTION LOAD
/// REPLACE` to every master: six connects, six compiles each.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_that_connects_compiles_the_library_once_per_master() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let mut clients = Vec::new();
    for _ in 0..6 {
        clients.push(client(&cluster, Duration::from_secs(30)).await);
    }
    for node in cluster.nodes() {
        assert_eq!(
            library_compiles(node),
            1,
            "master {} compiled the library more than once",
            node.port()
        );
    }
    let flushed = master_node(&cluster, "after-flush");
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut flushed.conn())
        .unwrap();
    let guard = clients[0].lock("after-flush").acquire().await.unwrap();
    guard.release().await.unwrap();
    for node in cluster.nodes() {
        let expected = if node.port() == flushed.port() { 2 } else { 1 };
        assert_eq!(
            library_compiles(node),
            expected,
            "master {} (flushed: {})",
            node.port(),
            node.port() == flushed.port()
        );
    }
}

/// On a cluster every script that changes data records its reply (the
/// request record of the re-send-safe form). A busy lock writes nothing but
/// that record, so on masters out of memory (`maxmemory` under
/// `noeviction`) the record must not turn its "busy" into an OOM error, by
/// FCALL or by EVALSHA (where Redis refuses a script's first write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_answers_busy_on_masters_out_of_memory() {
    let cluster = Cluster::start(3, 0).expect("start a 3-master cluster");
    let stranger = client(&cluster, Duration::from_secs(30)).await;
    let functions = client(&cluster, Duration::from_secs(30)).await;
    let evalsha = ClientBuilder::cluster(cluster.urls())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .retry_delay(Duration::from_millis(50))
        .script_functions(false)
        .connect()
        .await
        .expect("connect to the cluster");
    let held = stranger.lock("oom-busy").acquire().await.unwrap();
    let permits = stranger.semaphore("oom-permits");
    assert!(permits.try_set_permits(1).await.unwrap());
    let permit = permits.acquire().await.unwrap();
    let set_maxmemory = |bytes: u64| {
        for node in cluster.nodes() {
            let mut conn = node.client().get_connection().unwrap();
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(bytes)
                .query(&mut conn)
                .unwrap();
        }
    };
    set_maxmemory(1);
    let mut failures = Vec::new();
    for (form, client) in [("functions", &functions), ("EVALSHA", &evalsha)] {
        let once = client.lock("oom-busy").try_acquire().await;
        if !matches!(once, Ok(None)) {
            failures.push(format!(
                "{form}: try_acquire of a busy lock answered {:?}",
                once.map(|guard| guard.map(|guard| guard.owner().to_owned()))
            ));
        }
        let once = client.semaphore("oom-permits").try_acquire().await;
        if !matches!(once, Ok(None)) {
            failures.push(format!(
                "{form}: try_acquire of a busy semaphore answered {:?}",
                once.map(|permit| permit.is_some())
            ));
        }
    }
    let released = (held.release().await, permit.release().await);
    set_maxmemory(0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        released.0.is_ok() && released.1.is_ok(),
        "releases on masters out of memory answered {released:?}"
    );
}

/// Issue 36 on a cluster: a thousand names, each locked once, leave at most
/// one key without an expiry per hash slot they fall in, each a shared
/// counter `redlatch_lock_token:{TAG}`; tokens grow per name. Failed
/// before: one `redisson_lock_token:{NAME}` per name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_names_used_once_leave_one_counter_per_slot_at_most() {
    let cluster = cluster();
    let client = client(&cluster, Duration::from_secs(5)).await;
    // Two tenants' names (two slots), and a few spread over the masters.
    let names: Vec<String> = (0..1000)
        .map(|i| match i % 10 {
            0 => format!("user:{i}"),
            odd if odd % 2 == 1 => format!("{{tenant-a}}:user:{i}"),
            _ => format!("{{tenant-b}}:user:{i}"),
        })
        .collect();
    for name in &names {
        let first = client.lock(name.as_str()).acquire().await.unwrap();
        let token = first.token();
        first.release().await.unwrap();
        let again = client.lock(name.as_str()).acquire().await.unwrap();
        assert!(again.token() > token, "{name}");
        again.release().await.unwrap();
    }
    let mut lasting = BTreeSet::new();
    for node in cluster.nodes() {
        let mut conn = node.conn();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        for key in keys {
            // A replica answers MOVED: its master lists the key too.
            let ttl: redis::RedisResult<i64> = redis::cmd("TTL").arg(&key).query(&mut conn);
            if matches!(ttl, Ok(-1)) {
                lasting.insert(key);
            }
        }
    }
    let slots: std::collections::HashSet<redis::cluster_routing::Slot> = names
        .iter()
        .map(redis::cluster_routing::Slot::for_key)
        .collect();
    assert!(
        lasting.len() <= slots.len() && !lasting.is_empty(),
        "{} keys without expiry for {} slots",
        lasting.len(),
        slots.len()
    );
    for key in &lasting {
        assert!(key.starts_with("redlatch_lock_token:{"), "{key}");
        assert!(
            slots.contains(&redis::cluster_routing::Slot::for_key(key)),
            "{key} is in no slot of the names"
        );
    }
}

/// The token lock on a cluster: names on every master exclude across
/// clients, stay renewed (per-slot batches of plain commands or scripts),
/// fence from the slot's counter, and a waiter gets the lock soon after the
/// release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_locks_exclude_renew_and_hand_over_on_a_cluster() {
    let cluster = cluster();
    let first = client(&cluster, Duration::from_secs(1)).await;
    let second = client(&cluster, Duration::from_secs(1)).await;
    let names: Vec<String> = (0..24).map(|i| format!("token:{i}")).collect();
    let mut guards = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let mut lock = first.token_lock(name.as_str());
        if index % 2 == 0 {
            lock = lock.fenced();
        }
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (name, guard) in names.iter().zip(&guards) {
        assert!(
            guard.is_held(),
            "{name} was lost: {:?}",
            guard.lost_reason()
        );
        let taken = second
            .token_lock(name.as_str())
            .try_acquire()
            .await
            .unwrap();
        assert!(taken.is_none(), "{name} was acquired twice");
    }
    let mut guards = guards.into_iter();
    let handed = guards.next().unwrap();
    let lock = second.token_lock(names[0].as_str());
    let waiting =
        tokio::spawn(async move { lock.acquire_within(Some(Duration::from_secs(10))).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    handed.release().await.unwrap();
    let taken = waiting
        .await
        .unwrap()
        .expect("the waiter gets the lock after the release");
    assert!(released.elapsed() < Duration::from_secs(2));
    taken.release().await.unwrap();
    for guard in guards {
        guard.release().await.unwrap();
    }
}

//! Through Sentinel: the client follows a master switch (master killed,
//! replica promoted) for commands and for wake-ups.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Client, ClientBuilder, Error, Guard};
use testkit::{MASTER_NAME, SentinelGroup};

async fn client(group: &SentinelGroup) -> Client {
    ClientBuilder::sentinel(group.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(1))
        .retry_delay(Duration::from_millis(50))
        .connect()
        .await
        .expect("connect through sentinel")
}

/// Acquires `name`, retrying connection errors for up to 20 s (the calls in
/// flight when the master dies fail; the next ones find the new master).
async fn acquire_eventually(client: &Client, name: &str) -> Guard {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client
            .lock(name)
            .acquire_within(Some(Duration::from_secs(5)))
            .await
        {
            Ok(guard) => return guard,
            Err(error) if error.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("acquire {name} after failover: {error}"),
        }
    }
}

async fn exists_on(group: &SentinelGroup, port: u16, key: &str) -> bool {
    let server = group.server_on(port).expect("a server of the group");
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    conn.exists(key).await.expect("EXISTS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_a_failover_to_the_promoted_replica() {
    let group = SentinelGroup::start(1).expect("start master, replica and 3 sentinels");
    let client = client(&group).await;
    let old = group.master_port().unwrap();

    let guard = client.lock("before").acquire().await.unwrap();
    assert!(
        exists_on(&group, old, "before").await,
        "the lock is on the master"
    );
    guard.release().await.unwrap();

    let (group, new) = tokio::task::spawn_blocking(move || {
        let mut group = group;
        let new = group.kill_master();
        (group, new)
    })
    .await
    .unwrap();
    let new = new.expect("a replica is promoted");
    assert_ne!(old, new);

    let guard = acquire_eventually(&client, "after").await;
    assert!(
        exists_on(&group, new, "after").await,
        "the lock is written on the new master"
    );

    // Wake-ups follow too: a waiter subscribed through the new master is
    // woken by the release, long before the 30 s lease would end.
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            let lock = client.lock("after").with_owner("waiter");
            let guard = lock.acquire_within(Some(Duration::from_secs(15))).await;
            guard.map(|guard| guard.token())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let token = guard.token();
    guard.release().await.unwrap();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter is woken and gets the lock");
    assert!(next > token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_protected_master_is_reached_with_master_auth() {
    let builder = testkit::RedisServer::builder().password("s3cret");
    let group = SentinelGroup::start_with(1, &builder).expect("start a protected group");

    let refused = ClientBuilder::sentinel(group.sentinel_urls(), MASTER_NAME)
        .connect_timeout(Duration::from_secs(2))
        .retries(0)
        .connect()
        .await;
    match refused {
        Err(Error::Redis { .. } | Error::Unavailable { .. }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }

    let client = ClientBuilder::sentinel(group.sentinel_urls(), MASTER_NAME)
        .master_auth(None, "s3cret")
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect with the master's password");
    let guard = client.lock("protected").acquire().await.unwrap();
    let port = group.master_port().unwrap();
    assert!(exists_on(&group, port, "protected").await);
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_master_is_left_for_the_new_one() {
    let group = SentinelGroup::start(1).expect("start master, replica and 3 sentinels");
    let client = client(&group).await;
    let old = group.master_port().unwrap();
    client
        .lock("before")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    // The old master stays up, as a replica of the promoted one.
    let (group, new) = tokio::task::spawn_blocking(move || {
        let new = group.failover();
        (group, new)
    })
    .await
    .unwrap();
    let new = new.expect("a manual failover completes");
    assert_ne!(old, new);

    // The client's connection to the old master is still open: the write is
    // refused with READONLY, and sent again to the master Sentinel names now.
    let guard = client.lock("after").acquire().await.unwrap();
    assert!(
        exists_on(&group, new, "after").await,
        "written on the new master"
    );
    guard.release().await.unwrap();
    // Every later call goes to the new master too.
    for i in 0..10 {
        let name = format!("later:{i}");
        let guard = client.lock(name.as_str()).acquire().await.unwrap();
        assert!(exists_on(&group, new, &name).await);
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_master_is_given_up_after_a_response_timeout() {
    let group = SentinelGroup::start(1).expect("start master, replica and 3 sentinels");
    let client = client(&group).await;
    let old = group.master_port().unwrap();

    // A waiter parked (and subscribed) on the master before it freezes; the
    // holder's lease is 30 s, longer than the waiter will wait.
    let lock = client.lock("job").with_owner("holder");
    let held = lock
        .clone()
        .with_lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            // Anonymous: its attempts are retried after connection errors.
            let lock = client.lock("job");
            lock.acquire_within(Some(Duration::from_secs(20))).await
        })
    };
    let subscribed = async {
        while lock.status().await.unwrap().waiting_clients == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), subscribed)
        .await
        .expect("the waiter subscribes");

    // Frozen, not dead: the client's connections stay open and silent.
    let (group, new) = tokio::task::spawn_blocking(move || {
        let new = group.pause_master();
        (group, new)
    })
    .await
    .unwrap();
    let new = new.expect("a replica is promoted");
    assert_ne!(old, new);

    // Commands leave the frozen master after one response timeout...
    let guard = acquire_eventually(&client, "after").await;
    assert!(
        exists_on(&group, new, "after").await,
        "written on the new master"
    );
    guard.release().await.unwrap();

    // ...and the subscription connection after a failed PING: the release on
    // the new master wakes the waiter long before the holder's lease ends.
    let released = held.release().await;
    assert!(matches!(released, Ok(()) | Err(Error::NotHeld { .. })));
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter is woken and gets the lock");
    next.release().await.unwrap();
}

/// Red team: a program on Sentinel that ends with its runtime (the
/// `#[tokio::main]` shape) takes its holder record with it, as one on a
/// single server does: its last word finds the master through Sentinel on
/// a connection of its own, after the runtime that held the client's
/// Sentinel connections has stopped.
#[test]
fn a_program_on_sentinel_that_ends_with_its_runtime_leaves_no_holder_record() {
    let group = SentinelGroup::start(1).expect("start master, replica and 3 sentinels");
    let master = group.master_port().unwrap();
    let server = group.server_on(master).expect("the master");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Still held when the program ends.
    let guard = runtime.block_on(async {
        let client = client(&group).await;
        let guard = client.lock("ends-on-sentinel").acquire().await.unwrap();
        // Named after about 50 ms.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(client);
        guard
    });
    let records = |server: &testkit::RedisServer| -> Vec<String> {
        redis::cmd("KEYS")
            .arg("*redlatch_holder*")
            .query(&mut server.conn())
            .unwrap()
    };
    assert_eq!(records(server).len(), 1, "the hold was never named");
    let started = Instant::now();
    drop(runtime);
    drop(guard);
    eprintln!("the runtime stopped in {:?}", started.elapsed());
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut left = records(server);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = records(server);
    }
    assert!(left.is_empty(), "the record outlived its program: {left:?}");
}

/// Red team: after a failover that leaves the old master up as a replica,
/// the loss watch stays on it (nothing closes its connection) while the
/// commands move to the new master. A replica that lags or whose link is
/// down (a full resync under way, a partition between the servers) then
/// answers the watch from stale data: a hold taken on the new master is
/// not there, and must not be marked lost for it; and a loss on the new
/// master must still be found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loss_watch_follows_the_master_past_a_failover_to_a_stale_replica() {
    let group = SentinelGroup::start(1).expect("start master, replica and 3 sentinels");
    let client = client(&group).await;
    let old = group.master_port().unwrap();
    // Watched on the old master.
    let before = client
        .lock("watched-before")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (group, new) = tokio::task::spawn_blocking(move || {
        let new = group.failover();
        (group, new)
    })
    .await
    .unwrap();
    let new = new.expect("a manual failover completes");
    assert_ne!(old, new);
    // The old master, now a replica, loses its link: its data goes stale.
    let stale = group.server_on(old).expect("the old master");
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query(&mut stale.conn())
        .unwrap();
    // Taken on the new master (the old one answers READONLY).
    let after = acquire_eventually(&client, "watched-after").await;
    let after = {
        // A fixed lease: only the watch can find its loss.
        after.release().await.unwrap();
        client
            .lock("watched-after")
            .with_lease(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap()
    };
    assert!(exists_on(&group, new, "watched-after").await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        after.is_held(),
        "a hold on the new master was marked lost ({:?}): the watch read a stale replica",
        after.lost_reason()
    );
    // A loss on the new master is found.
    let server = group.server_on(new).expect("the new master");
    let _: () = redis::cmd("DEL")
        .arg("watched-after")
        .query(&mut server.conn())
        .map(|_: i64| ())
        .unwrap();
    tokio::time::timeout(Duration::from_secs(3), after.lost())
        .await
        .expect("a loss on the new master went unnoticed: the watch reads the old one");
    drop(before);
}

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
            .acquire_timeout(Duration::from_secs(5))
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
            let guard = lock.acquire_timeout(Duration::from_secs(15)).await;
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

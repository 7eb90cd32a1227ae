//! "Wait for N replicas" after acquire (Redis `WAIT`): confirmed acquisitions
//! are on the replica; unconfirmed ones fail with a typed error and are undone.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Client, Error};
use testkit::ReplicaSet;

async fn client(set: &ReplicaSet, replicas: u32, timeout: Duration) -> Client {
    Client::builder(&set.master().url())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .wait_for_replicas(replicas, timeout)
        .connect()
        .await
        .expect("connect to the master")
}

async fn exists(server: &testkit::RedisServer, key: &str) -> bool {
    let mut conn = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    conn.exists(key).await.expect("EXISTS")
}

#[tokio::test]
async fn a_confirmed_acquisition_is_on_the_replica_when_acquire_returns() {
    let set = ReplicaSet::start(1).expect("start a master and a replica");
    let client = client(&set, 1, Duration::from_secs(2)).await;
    for i in 0..20 {
        let name = format!("replicated:{i}");
        let guard = client.lock(name.as_str()).acquire().await.unwrap();
        // WAIT returned: the replica has applied the acquire script's writes.
        assert!(
            exists(set.replica(0), &name).await,
            "{name} not on the replica"
        );
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn a_paused_replica_fails_the_acquire_within_the_timeout_and_undoes_it() {
    let set = ReplicaSet::start(1).expect("start a master and a replica");
    let timeout = Duration::from_millis(300);
    let client = client(&set, 1, timeout).await;
    set.replica(0).pause().unwrap();
    let started = Instant::now();
    let outcome = client.lock("unconfirmed").try_acquire().await;
    let took = started.elapsed();
    set.replica(0).resume().unwrap();
    match outcome {
        Err(Error::ReplicasNotConfirmed {
            acknowledged: 0,
            wanted: 1,
            timeout: reported,
            ..
        }) => assert_eq!(reported, timeout),
        other => panic!("expected ReplicasNotConfirmed, got {other:?}"),
    }
    assert!(took >= timeout, "failed before the wait ran out ({took:?})");
    assert!(took < timeout + Duration::from_secs(5), "took {took:?}");
    assert!(
        !exists(set.master(), "unconfirmed").await,
        "the unconfirmed acquisition is undone on the master"
    );
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test]
async fn asking_for_more_replicas_than_exist_reports_how_many_confirmed() {
    let set = ReplicaSet::start(1).expect("start a master and a replica");
    let client = client(&set, 2, Duration::from_millis(200)).await;
    match client.lock("two").try_acquire().await {
        Err(Error::ReplicasNotConfirmed {
            acknowledged: 1,
            wanted: 2,
            ..
        }) => {}
        other => panic!("expected 1 of 2 replicas, got {other:?}"),
    }
    assert!(!exists(set.master(), "two").await);
}

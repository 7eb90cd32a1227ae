//! The multi-lock: all-or-nothing, deadlock-free, released together.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlatch::{Client, MultiLock};

const NAMES: [&str; 4] = ["acct:a", "acct:b", "acct:c", "acct:d"];
const ROUNDS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_asking_in_opposite_orders_never_deadlock() {
    let server = common::server();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for reversed in [false, true] {
        let client = common::client(&server).await;
        // Two tasks per client and direction, so holders of one client contend too.
        for _ in 0..2 {
            let client = client.clone();
            let inside = inside.clone();
            let overlaps = overlaps.clone();
            workers.push(tokio::spawn(async move {
                let mut names = NAMES.to_vec();
                if reversed {
                    names.reverse();
                }
                let all = MultiLock::new(names.iter().map(|name| client.lock(*name)));
                for _ in 0..ROUNDS {
                    let guard = all.acquire().await.expect("acquire all");
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release all");
                }
            }));
        }
    }
    // Ordered acquisition finishes quickly; a deadlock would hang here for ever
    // (watchdog leases never run out), so the bound is only a generous ceiling.
    tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(workers),
    )
    .await
    .expect("a deadlock: the workers did not finish")
    .into_iter()
    .for_each(|joined| joined.expect("worker"));
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of the same locks at once"
    );
}

#[tokio::test]
async fn timeout_releases_the_locks_already_taken() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let busy = other.lock("m:b").acquire().await.unwrap();
    let both = MultiLock::new([client.lock("m:c"), client.lock("m:b"), client.lock("m:a")]);
    let err = both
        .acquire_within(Some(Duration::from_millis(300)))
        .await
        .unwrap_err();
    match err {
        redlatch::Error::Timeout { name, waited } => {
            assert_eq!(name, "m:b");
            assert_eq!(waited, Duration::from_millis(300));
        }
        other => panic!("expected a timeout, got {other}"),
    }
    // m:a was taken first (key order) and must be free again.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client
                .lock("m:a")
                .status()
                .await
                .unwrap()
                .holders
                .is_empty()
        })
        .await,
        "the partial hold on m:a was left behind"
    );
    assert!(
        client
            .lock("m:c")
            .status()
            .await
            .unwrap()
            .holders
            .is_empty()
    );
    assert!(both.try_acquire().await.unwrap().is_none());
    drop(busy);
    let guard = both
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .expect("all three once m:b is free");
    let keys: Vec<&str> = guard.guards().iter().map(|guard| guard.key()).collect();
    assert_eq!(keys, ["m:a", "m:b", "m:c"], "acquired in key order");
    assert!(guard.is_held());
}

#[tokio::test]
async fn cancelled_acquire_releases_partial_holds_and_drop_releases_all() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let busy = other.lock("n:2").acquire().await.unwrap();
    let pair = MultiLock::new([client.lock("n:1"), client.lock("n:2")]);
    let waiting = tokio::spawn({
        let pair = pair.clone();
        async move { pair.acquire().await }
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            !client
                .lock("n:1")
                .status()
                .await
                .unwrap()
                .holders
                .is_empty()
        })
        .await
    );
    waiting.abort();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client
                .lock("n:1")
                .status()
                .await
                .unwrap()
                .holders
                .is_empty()
        })
        .await,
        "the cancelled multi-lock kept n:1"
    );
    drop(busy);
    let guard = pair.acquire().await.unwrap();
    drop(guard);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            let free = |name: &'static str| {
                let client: Client = client.clone();
                async move { client.lock(name).status().await.unwrap().holders.is_empty() }
            };
            free("n:1").await && free("n:2").await
        })
        .await,
        "dropping the multi-guard released every lock"
    );
}

#[tokio::test]
async fn locks_of_two_servers_are_taken_together_and_lost_reports_either() {
    let servers = testkit::Servers::start(2).unwrap();
    let first = common::client(&servers[0]).await;
    let second = common::client(&servers[1]).await;
    let both = MultiLock::new([second.lock("job"), first.lock("job")]);
    let guard = both.acquire().await.unwrap();
    assert_eq!(
        guard.guards().len(),
        2,
        "one key on two servers is two locks"
    );
    let lost = guard.lost();
    second.lock("job").force_unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("lost() resolves when any lock is lost");
    assert!(!guard.is_held());
    assert!(matches!(
        guard.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
}

#[tokio::test]
async fn empty_and_repeated_locks_are_refused() {
    let server = common::server();
    let client = common::client(&server).await;
    assert!(matches!(
        MultiLock::new([]).try_acquire().await,
        Err(redlatch::Error::InvalidConfig(_))
    ));
    assert!(matches!(
        MultiLock::new([client.lock("r"), client.lock("q"), client.lock("r")])
            .try_acquire()
            .await,
        Err(redlatch::Error::InvalidName { .. })
    ));
    assert!(matches!(
        MultiLock::new([client.lock("ok"), client.lock("")])
            .acquire()
            .await,
        Err(redlatch::Error::InvalidName { .. })
    ));
    assert!(client.lock("q").status().await.unwrap().holders.is_empty());
}

//! Redlock over independent masters: acquire, release, quorum failures,
//! frozen masters, mutual exclusion and fencing tokens.

use std::time::Duration;

use redlatch::{Client, Redlock};
use testkit::Servers;

/// Clients with short timeouts, one per master.
async fn redlock(masters: &Servers) -> Redlock {
    let mut clients = Vec::new();
    for (i, server) in masters.iter().enumerate() {
        let client = Client::builder(&server.url())
            .connect_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_millis(500))
            .retries(1)
            .retry_delay(Duration::from_millis(20))
            .connect()
            .await
            .expect("connect to a master");
        clients.push((format!("master-{i}"), client));
    }
    Redlock::with_labels(clients).expect("redlock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_acquire_and_release() {
    let masters = Servers::start(5).expect("start masters");
    let redlock = redlock(&masters).await;
    let lock = redlock.lock("rl:basic");
    let guard = lock.acquire().await.expect("acquire");
    assert!(guard.is_held());
    let status = lock.status().await.expect("status");
    assert_eq!(status.majority_holder(), Some(guard.owner()));
    assert!(lock.try_acquire().await.expect("try").is_none(), "held on a majority");
    let first = guard.token();
    guard.release().await.expect("release");
    let again = lock.try_acquire().await.expect("try").expect("free again");
    assert!(again.token() > first);
    again.release().await.expect("release");
    let status = lock.status().await.expect("status");
    assert_eq!(status.majority_holder(), None);
}

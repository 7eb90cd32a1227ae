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

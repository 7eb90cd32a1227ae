//! The count-down latch: the count down that opens it wakes every awaiter
//! of every client, an open latch is awaited in one read, a count is set
//! once, bad data is refused, and a cancelled await leaves nothing behind.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::AsyncCommands;
use redlatch::{CountDownLatch, Error};

use crate::common;

const CHANNEL: &str = "redisson_countdownlatch__channel__{";

fn channel(key: &str) -> String {
    format!("{CHANNEL}{key}}}")
}

/// Waits until `n` connections listen on `key`'s latch channel.
async fn listening(admin: &redis::aio::MultiplexedConnection, key: &str, n: i64) {
    let channel = channel(key);
    let heard = common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        let channel = channel.clone();
        async move { common::subscribers(&mut admin, &channel).await == n }
    })
    .await;
    assert!(heard, "{n} subscription(s) on {channel} expected");
}

/// The latch's waiters read the count again every 5 s without a message:
/// a wake-up this soon after the count down is the message's.
const PROMPT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_down_to_zero_wakes_every_awaiter_of_every_client_at_once() {
    let server = common::server();
    let admin = common::admin(&server).await;
    let setter = common::client(&server).await;
    let latch = setter.count_down_latch("shards");
    assert!(latch.try_set_count(3).await.unwrap());
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let client = common::client(&server).await;
        for _ in 0..4 {
            // Made the generic way, as a primitive with no client method would be.
            let latch = client.handle::<CountDownLatch>("shards");
            waiters.push(tokio::spawn(async move {
                latch.await_zero().await.map(|()| Instant::now())
            }));
        }
    }
    // One subscription per client, however many of its tasks wait.
    listening(&admin, "shards", 3).await;
    assert_eq!(latch.count_down().await.unwrap(), 2);
    assert_eq!(latch.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        waiters.iter().all(|waiter| !waiter.is_finished()),
        "an awaiter returned before the count was zero"
    );
    let opened = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let woken = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::join_all(waiters),
    )
    .await
    .expect("every awaiter returned");
    let last = woken
        .into_iter()
        .map(|joined| joined.unwrap().expect("await_zero"))
        .max()
        .unwrap();
    let took = last.saturating_duration_since(opened);
    assert!(
        took < PROMPT,
        "the last of 12 awaiters woke {took:?} after the count down"
    );
    let mut admin = admin.clone();
    let exists: bool = admin.exists("shards").await.unwrap();
    assert!(!exists, "the key is deleted at zero");
    assert_eq!(latch.count().await.unwrap(), 0);
}

#[tokio::test]
async fn an_open_latch_is_awaited_in_one_read_and_leaves_nothing() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let latch = client.count_down_latch("never-set");
    assert_eq!(latch.count().await.unwrap(), 0);
    tokio::time::timeout(Duration::from_secs(2), latch.await_zero())
        .await
        .expect("an open latch is awaited at once")
        .unwrap();
    assert!(latch.await_within(None).await.unwrap());
    assert!(latch.await_within(Some(Duration::ZERO)).await.unwrap());
    assert_eq!(
        common::subscribers(&mut admin, &channel("never-set")).await,
        0,
        "no subscription for an open latch"
    );
    // Counting an open latch down writes nothing (Redisson's DECR then DEL).
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert!(!latch.delete().await.unwrap(), "nothing to delete");
    let keys: Vec<String> = admin.keys("*").await.unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test]
async fn a_count_is_set_once_until_the_latch_opens_and_then_again() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let latch = client.count_down_latch("round");
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(
        !other
            .count_down_latch("round")
            .try_set_count(5)
            .await
            .unwrap(),
        "set twice"
    );
    assert_eq!(latch.count().await.unwrap(), 2);
    let stored: String = admin.get("round").await.unwrap();
    assert_eq!(stored, "2", "Redisson's layout: the count as a string");
    let ttl: i64 = admin.ttl("round").await.unwrap();
    assert_eq!(ttl, -1, "no expiry");
    assert!(
        !latch
            .await_within(Some(Duration::from_millis(100)))
            .await
            .unwrap()
    );
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert!(
        latch.try_set_count(1).await.unwrap(),
        "open again: set anew"
    );
    assert!(latch.delete().await.unwrap());
    assert!(latch.await_within(Some(Duration::ZERO)).await.unwrap());
    for count in [0, u64::MAX, 1 << 63] {
        match latch.try_set_count(count).await {
            Err(Error::InvalidCount { count: refused, .. }) => assert_eq!(refused, count),
            other => panic!("try_set_count({count}): {other:?}"),
        }
    }
    assert!(latch.try_set_count(i64::MAX as u64).await.unwrap());
    assert_eq!(
        latch.count_down().await.unwrap(),
        i64::MAX as u64 - 1,
        "exact"
    );
    assert!(matches!(
        client.count_down_latch("").count().await,
        Err(Error::InvalidName { .. })
    ));
}

#[tokio::test]
async fn messages_are_redissons_new_count_and_zero_count() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(channel("app:done")).await.unwrap();
    let latch = client.count_down_latch("app:done");
    latch.try_set_count(2).await.unwrap();
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    latch.try_set_count(7).await.unwrap();
    latch.delete().await.unwrap();
    let mut messages = pubsub.on_message();
    let mut heard = Vec::new();
    for _ in 0..4 {
        let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .expect("a message")
            .unwrap();
        heard.push(message.get_payload::<String>().unwrap());
    }
    // Set: 1; zero: 0 (not on the count down that leaves 1); set: 1; deleted: 0.
    assert_eq!(heard, ["1", "0", "1", "0"]);
}

#[tokio::test]
async fn data_a_latch_cannot_use_is_refused_and_left_alone() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let () = admin.hset("a-hash", "f", 1).await.unwrap();
    let () = admin.set("text", "ten").await.unwrap();
    let () = admin.set("fraction", "1.5").await.unwrap();
    let () = admin.set("padded", " 3").await.unwrap();
    for name in ["a-hash", "text", "fraction", "padded"] {
        let latch = client.count_down_latch(name);
        let outcomes = [
            latch.count().await.map(drop),
            latch.count_down().await.map(drop),
            latch.try_set_count(1).await.map(drop),
            latch.delete().await.map(drop),
            latch.await_zero().await,
            latch.await_within(Some(Duration::ZERO)).await.map(drop),
        ];
        for outcome in outcomes {
            match outcome {
                Err(Error::WrongValue { key, .. }) => assert_eq!(key, name),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
    let kind: String = redis::cmd("TYPE")
        .arg("a-hash")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(kind, "hash", "a foreign key is left alone");
    let text: String = admin.get("text").await.unwrap();
    assert_eq!(text, "ten");

    // A count at or below zero (Redisson's trySetCount takes any long) is open.
    let () = admin.set("negative", "-3").await.unwrap();
    let latch = client.count_down_latch("negative");
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(latch.await_within(Some(Duration::ZERO)).await.unwrap());
    assert!(!latch.try_set_count(1).await.unwrap(), "it has a count");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let exists: bool = admin.exists("negative").await.unwrap();
    assert!(!exists, "deleted below zero, as Redisson's count down does");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_await_leaves_no_subscription_and_a_bounded_one_gives_up() {
    let server = common::server();
    let client = common::client(&server).await;
    let admin = common::admin(&server).await;
    let latch = client.count_down_latch("gate");
    latch.try_set_count(1).await.unwrap();
    for _ in 0..3 {
        let waiting = tokio::spawn({
            let latch = latch.clone();
            async move { latch.await_zero().await }
        });
        listening(&admin, "gate", 1).await;
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        // The subscription lingers 500 ms after its last waiter, then goes.
        listening(&admin, "gate", 0).await;
    }
    let started = Instant::now();
    let bounded = latch.await_within(Some(Duration::from_millis(300))).await;
    assert!(!bounded.unwrap(), "still closed");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // select! drops the await mid-wait too.
    tokio::select! {
        outcome = latch.await_zero() => panic!("returned while closed: {outcome:?}"),
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    listening(&admin, "gate", 0).await;
    assert_eq!(
        latch.count().await.unwrap(),
        1,
        "awaits never touch the count"
    );
    // And a later await still wakes on the count down.
    let waiting = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_zero().await }
    });
    listening(&admin, "gate", 1).await;
    latch.count_down().await.unwrap();
    tokio::time::timeout(PROMPT, waiting)
        .await
        .expect("woken by the count down")
        .unwrap()
        .unwrap();
}

/// Many count downs at once, from tasks of several clients: each takes
/// exactly one, the count never goes below zero, and the zero-count
/// message is published once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_count_downs_take_one_each_and_open_the_latch_once() {
    const COUNT: u64 = 120;
    let server = common::server();
    let setup = common::client(&server).await;
    let latch = setup.count_down_latch("race");
    assert!(latch.try_set_count(COUNT).await.unwrap());
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(channel("race")).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = common::client(&server).await;
        for _ in 0..(COUNT / 3 + 10) {
            let latch = client.count_down_latch("race");
            tasks.push(tokio::spawn(async move { latch.count_down().await }));
        }
    }
    let mut left: Vec<u64> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .map(|joined| joined.unwrap().expect("count_down"))
        .collect();
    left.sort_unstable();
    let zeros = left.iter().filter(|left| **left == 0).count();
    let above: Vec<u64> = left.into_iter().filter(|left| *left > 0).collect();
    assert_eq!(
        above,
        (1..COUNT).collect::<Vec<_>>(),
        "each count down took one"
    );
    assert_eq!(zeros, 31, "the one that opened it, and 30 on an open latch");
    let mut messages = pubsub.on_message();
    let first = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the zero-count message")
        .unwrap();
    assert_eq!(first.get_payload::<String>().unwrap(), "0");
    let more = tokio::time::timeout(Duration::from_millis(300), messages.next()).await;
    assert!(more.is_err(), "a second message: {more:?}");
    assert_eq!(latch.count().await.unwrap(), 0);
}

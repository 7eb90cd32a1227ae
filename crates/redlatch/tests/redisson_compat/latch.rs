//! The count-down latch both ways, on every kind of legal name: Redisson's
//! `RCountDownLatch` scripts (its `trySetCount`, `countDown` and `delete`,
//! publishing with the command passed last as current Redisson does) and its
//! waiter (a subscriber on `redisson_countdownlatch__channel__{NAME}` that
//! reads the count again on the zero-count message `0`, and keeps waiting on
//! the new-count message `1`) against redlatch's latch on the same name.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::{AsyncCommands, Script};
use redlatch::CountDownLatch;

use crate::{LEGAL_NAMES, common};

/// Redisson's `trySetCount`: KEYS count, channel; ARGV new-count message
/// (`1`), count, publish command. 1 set, 0 already there.
const JAVA_TRY_SET_COUNT: &str = r"
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2])
  redis.call(ARGV[3], KEYS[2], ARGV[1])
  return 1
else
  return 0
end";

/// Redisson's `countDown`: DECR; DEL at or below zero; the zero-count
/// message at zero. KEYS count, channel; ARGV message (`0`), publish command.
const JAVA_COUNT_DOWN: &str = r"
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end";

/// Redisson's `delete`: DEL, and the new-count message `1` when it deleted.
/// KEYS count, channel; ARGV message, publish command.
const JAVA_DELETE: &str = r"
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
else
  return 0
end";

/// A wake-up this soon is the message's: redlatch's waiters read the count
/// again unprompted every 5 s.
const PROMPT: Duration = Duration::from_secs(2);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

async fn java_try_set_count(
    java: &mut redis::aio::MultiplexedConnection,
    name: &str,
    count: i64,
) -> i64 {
    Script::new(JAVA_TRY_SET_COUNT)
        .key(name)
        .key(channel(name))
        .arg(1)
        .arg(count)
        .arg("publish")
        .invoke_async(java)
        .await
        .unwrap()
}

async fn java_count_down(java: &mut redis::aio::MultiplexedConnection, name: &str) {
    let () = Script::new(JAVA_COUNT_DOWN)
        .key(name)
        .key(channel(name))
        .arg(0)
        .arg("publish")
        .invoke_async(java)
        .await
        .unwrap();
}

async fn java_delete(java: &mut redis::aio::MultiplexedConnection, name: &str) -> i64 {
    Script::new(JAVA_DELETE)
        .key(name)
        .key(channel(name))
        .arg(1)
        .arg("publish")
        .invoke_async(java)
        .await
        .unwrap()
}

/// Redisson's `getCount`: GET, absent read as 0.
async fn java_count(java: &mut redis::aio::MultiplexedConnection, name: &str) -> i64 {
    let count: Option<i64> = java.get(name).await.unwrap();
    count.unwrap_or(0)
}

/// Redisson's `await`, subscribed already: reads the count, and on each
/// zero-count message reads it again; the new-count message only closes
/// its local latch. Returns when the count reads 0 or below.
async fn java_await(
    java: &mut redis::aio::MultiplexedConnection,
    pubsub: &mut redis::aio::PubSub,
    name: &str,
) {
    let mut messages = pubsub.on_message();
    while java_count(java, name).await > 0 {
        loop {
            let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
                .await
                .unwrap_or_else(|_| panic!("{name}: no zero-count message within 5 s"))
                .expect("a message");
            if message.get_payload::<String>().unwrap() == "0" {
                break;
            }
        }
    }
}

async fn subscribed(admin: &redis::aio::MultiplexedConnection, name: &str) {
    let channel = channel(name);
    let listening = common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        let channel = channel.clone();
        async move { common::subscribers(&mut admin, &channel).await > 0 }
    })
    .await;
    assert!(listening, "nobody listens on {channel}");
}

async fn both_ways(name: &str) {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    // Made the generic way, as a primitive with no client method would be.
    let latch = client.handle::<CountDownLatch>(name);

    // Redisson sets and counts down; redlatch reads and awaits.
    assert_eq!(java_try_set_count(&mut java, name, 2).await, 1);
    assert!(
        !latch.try_set_count(9).await.unwrap(),
        "{name}: set by Redisson"
    );
    assert_eq!(latch.count().await.unwrap(), 2);
    let waiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_zero().await }
    });
    subscribed(&java, name).await;
    java_count_down(&mut java, name).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "{name}: returned at 1");
    assert_eq!(latch.count().await.unwrap(), 1);
    let at = Instant::now();
    java_count_down(&mut java, name).await;
    tokio::time::timeout(PROMPT, waiter)
        .await
        .unwrap_or_else(|_| panic!("{name}: Redisson's zero-count message woke nobody"))
        .unwrap()
        .unwrap();
    let took = at.elapsed();
    assert!(
        took < PROMPT,
        "{name}: woke {took:?} after Redisson's count down"
    );

    // redlatch sets and counts down; a Redisson waiter hears it open.
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(
        java_try_set_count(&mut java, name, 9).await,
        0,
        "{name}: set by redlatch"
    );
    assert_eq!(java_count(&mut java, name).await, 2);
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(channel(name)).await.unwrap();
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(java_count(&mut java, name).await, 1);
    let opened = tokio::spawn({
        let latch = latch.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            latch.count_down().await
        }
    });
    let at = Instant::now();
    java_await(&mut java, &mut pubsub, name).await;
    let took = at.elapsed();
    assert!(
        took < PROMPT,
        "{name}: Redisson's waiter woke {took:?} after"
    );
    assert_eq!(opened.await.unwrap().unwrap(), 0);
    let exists: bool = java.exists(name).await.unwrap();
    assert!(
        !exists,
        "{name}: deleted at zero, as Redisson's count down does"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_counts_and_wake_ups_cross_both_ways() {
    for name in LEGAL_NAMES {
        both_ways(name).await;
    }
}

/// Redisson's `delete` publishes `1`: a redlatch waiter reads the count
/// again on any message and finds the latch open. redlatch's `delete`
/// publishes `0`, on which a Redisson waiter reads the count again too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_latch_releases_waiters_of_both_sides() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "batch:7";
    let latch = client.count_down_latch(name);

    assert_eq!(java_try_set_count(&mut java, name, 3).await, 1);
    let waiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.await_zero().await }
    });
    subscribed(&java, name).await;
    assert_eq!(java_delete(&mut java, name).await, 1);
    tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("Redisson's delete woke the redlatch waiter")
        .unwrap()
        .unwrap();

    assert!(latch.try_set_count(3).await.unwrap());
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(channel(name)).await.unwrap();
    let deleted = tokio::spawn({
        let latch = latch.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            latch.delete().await
        }
    });
    java_await(&mut java, &mut pubsub, name).await;
    assert!(deleted.await.unwrap().unwrap());

    // Counts Redisson allows and redlatch does not set: zero and below read open.
    for count in [0, -2] {
        assert_eq!(java_try_set_count(&mut java, name, count).await, 1);
        assert_eq!(latch.count().await.unwrap(), 0);
        assert!(latch.await_within(Some(Duration::ZERO)).await.unwrap());
        assert!(!latch.try_set_count(1).await.unwrap(), "a count is there");
        assert_eq!(latch.count_down().await.unwrap(), 0);
        assert_eq!(
            java_count(&mut java, name).await,
            0,
            "deleted, as Redisson's count down would"
        );
    }
}

//! Wake-ups both ways by the message, well before any timer could explain them, for the lock, the read-write lock and
//! the semaphore, on every kind of legal name: a Redisson release wakes a
//! parked redlatch waiter, and a redlatch release reaches the channel a
//! parked Redisson waiter listens on. (The fair lock's per-waiter channels:
//! `fair.rs`.) Leases are 30 s, so only the message can explain a wake-up.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::{AsyncCommands, Script};

use crate::names::prefix_name;
use crate::{JAVA_OWNER, LEGAL_NAMES, common};

/// One message on loopback takes well under a millisecond; 1 s leaves room
/// for a loaded CI machine and is still 30 times shorter than the leases,
/// the only other thing that could end a wait here.
const PROMPT: Duration = Duration::from_secs(1);

/// Redisson's write lock, first hold. KEYS: lock; ARGV: lease ms, the
/// writer's field (`<uuid>:<thread>:write`). nil when taken, else the PTTL.
const JAVA_WRITE_LOCK: &str = r"
if redis.call('hget', KEYS[1], 'mode') == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";

/// Redisson's write unlock of its only hold: DEL, then its read-unlock
/// message `1` on the read-write channel. KEYS: lock, channel.
const JAVA_WRITE_UNLOCK: &str = r"
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], 1)
return 1";

/// Redisson's semaphore release: INCRBY, then the new count on the channel.
/// KEYS: count, channel; ARGV: permits.
const JAVA_SEMAPHORE_RELEASE: &str = r"
local count = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], count)
return count";

/// Waits for the first message on `channel` and says how long after `from`.
async fn heard(pubsub: &mut redis::aio::PubSub, channel: &str, from: Instant) -> Duration {
    let message = tokio::time::timeout(Duration::from_secs(2), pubsub.on_message().next())
        .await
        .unwrap_or_else(|_| panic!("nothing on {channel} within 2 s"))
        .expect("a message");
    assert_eq!(message.get_channel_name(), channel);
    from.elapsed()
}

/// Waits until some client listens on `channel` (a parked waiter).
async fn parked(java: &redis::aio::MultiplexedConnection, channel: &str) {
    let listening = common::eventually(Duration::from_secs(5), || {
        let mut java = java.clone();
        async move { common::subscribers(&mut java, channel).await > 0 }
    })
    .await;
    assert!(listening, "no waiter parked on {channel}");
}

async fn wakes_on_the_lock(name: &str) {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let channel = prefix_name("redisson_lock__channel", name);

    // Redisson → redlatch.
    let taken = crate::java_lock_on(&mut java, name).await;
    assert_eq!(taken, None);
    let waiter = tokio::spawn({
        let lock = client.lock(name);
        async move { lock.acquire().await }
    });
    parked(&java, &channel).await;
    let at = Instant::now();
    let unlocked = crate::java_unlock_on(&mut java, name).await;
    assert_eq!(unlocked, Some(1));
    let guard = waiter.await.unwrap().unwrap();
    let took = at.elapsed();
    assert!(
        took < PROMPT,
        "{name}: redlatch woke {took:?} after Redisson's unlock"
    );

    guard.release().await.unwrap();

    // redlatch → Redisson: a Redisson waiter does not mark the hold it
    // found, so a client that shares names with Redisson's `RLock` wakes on
    // every last release (`redisson_waiters`), a hold taken at once by a
    // client that never waited on the name included.
    let interop = redlatch::Client::builder(&server.url())
        .redisson_waiters(true)
        .connect()
        .await
        .unwrap();
    let guard = interop.lock(name).acquire().await.unwrap();
    let busy = crate::java_lock_on(&mut java, name).await;
    assert!(busy.is_some(), "{name}: Redisson took a held lock");
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&channel).await.unwrap();
    let at = Instant::now();
    guard.release().await.unwrap();
    let took = heard(&mut pubsub, &channel, at).await;
    assert!(
        took < PROMPT,
        "{name}: Redisson heard {took:?} after the release"
    );
}

async fn wakes_on_the_read_write_lock(name: &str) {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let channel = prefix_name("redisson_rwlock", name);
    let write_field = format!("{JAVA_OWNER}:write");

    // A Redisson writer's unlock wakes a parked redlatch reader.
    let taken: Option<i64> = Script::new(JAVA_WRITE_LOCK)
        .key(name)
        .arg(30_000)
        .arg(&write_field)
        .invoke_async(&mut java)
        .await
        .unwrap();
    assert_eq!(taken, None);
    let reader = tokio::spawn({
        let rw = client.read_write_lock(name);
        async move { rw.read().await }
    });
    parked(&java, &channel).await;
    let at = Instant::now();
    let _: i64 = Script::new(JAVA_WRITE_UNLOCK)
        .key(name)
        .key(&channel)
        .invoke_async(&mut java)
        .await
        .unwrap();
    let read = reader.await.unwrap().unwrap();
    let took = at.elapsed();
    assert!(
        took < PROMPT,
        "{name}: reader woke {took:?} after Redisson's write unlock"
    );
    read.release().await.unwrap();

    // A redlatch writer's release reaches a parked Redisson waiter's channel.
    let write = client.read_write_lock(name).write().await.unwrap();
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&channel).await.unwrap();
    let at = Instant::now();
    write.release().await.unwrap();
    let took = heard(&mut pubsub, &channel, at).await;
    assert!(
        took < PROMPT,
        "{name}: Redisson heard {took:?} after the write release"
    );
}

async fn wakes_on_the_semaphore(name: &str) {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let channel = prefix_name("redisson_sc", name);

    // Redisson holds the only permit; its release wakes a redlatch waiter.
    let () = java.set(name, 0).await.unwrap();
    let waiter = tokio::spawn({
        let semaphore = client.semaphore(name);
        async move { semaphore.acquire().await }
    });
    parked(&java, &channel).await;
    let at = Instant::now();
    let _: i64 = Script::new(JAVA_SEMAPHORE_RELEASE)
        .key(name)
        .key(&channel)
        .arg(1)
        .invoke_async(&mut java)
        .await
        .unwrap();
    let permit = waiter.await.unwrap().unwrap();
    let took = at.elapsed();
    assert!(
        took < PROMPT,
        "{name}: redlatch woke {took:?} after Redisson's release"
    );

    // redlatch's release reaches a parked Redisson waiter's channel.
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(&channel).await.unwrap();
    let at = Instant::now();
    permit.release().await.unwrap();
    let took = heard(&mut pubsub, &channel, at).await;
    assert!(
        took < PROMPT,
        "{name}: Redisson heard {took:?} after the release"
    );
    let count: i64 = java.get(name).await.unwrap();
    assert_eq!(count, 1, "{name}: permits conserved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wake_ups_cross_both_ways_by_the_message() {
    for name in LEGAL_NAMES {
        wakes_on_the_lock(name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_wake_ups_cross_both_ways_by_the_message() {
    for name in LEGAL_NAMES {
        wakes_on_the_read_write_lock(name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_wake_ups_cross_both_ways_by_the_message() {
    for name in LEGAL_NAMES {
        wakes_on_the_semaphore(name).await;
    }
}

//! Names with braces: Redisson derives a channel or side key as
//! `prefix:{NAME}` / `{NAME}:suffix`, but leaves the name as it is when it
//! already holds a `{` (`prefix:NAME`, `NAME:suffix`). The Java side here
//! computes its names that way, as a Redisson client would.

use std::time::{Duration, Instant};

use redis::Script;

use crate::JAVA_OWNER;
use crate::common;

/// Redisson's `prefixName`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Redisson's `suffixName`.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// Redisson's read-lock acquire, written from its documented layout:
/// KEYS[1] the lock hash, KEYS[2] this reader's timeout key prefix
/// (`suffixName(NAME, <uuid>:<thread>) + ":rwlock_timeout"`); ARGV[1] lease
/// ms, ARGV[2] the reader's field, ARGV[3] the same thread's write field.
/// nil when taken, else the PTTL.
pub(crate) const REDISSON_READ_LOCK: &str = "\
local mode = redis.call('hget', KEYS[1], 'mode') \
if mode == false then \
  redis.call('hset', KEYS[1], 'mode', 'read') \
  redis.call('hset', KEYS[1], ARGV[2], 1) \
  redis.call('set', KEYS[2] .. ':1', 1) \
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]) \
  redis.call('pexpire', KEYS[1], ARGV[1]) \
  return nil \
end \
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then \
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1) \
  redis.call('set', KEYS[2] .. ':' .. n, 1) \
  redis.call('pexpire', KEYS[2] .. ':' .. n, ARGV[1]) \
  local left = redis.call('pttl', KEYS[1]) \
  redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1]))) \
  return nil \
end \
return redis.call('pttl', KEYS[1])";

#[tokio::test]
async fn a_redisson_unlock_wakes_a_redlatch_waiter_on_a_name_with_braces() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "order{42}";
    let taken = crate::java_lock_on(&mut java, name).await;
    assert_eq!(taken, None, "Redisson takes it");
    let waiter = tokio::spawn({
        let lock = client.lock(name);
        async move {
            lock.acquire_within(Some(Duration::from_secs(10)))
                .await
                .map(drop)
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let unlocked_at = Instant::now();
    let released = crate::java_unlock_on(&mut java, name).await;
    assert_eq!(released, Some(1));
    let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by Redisson's message, not by the 30 s lease")
        .unwrap();
    assert!(woken.is_ok(), "{woken:?}");
    // Generous: the wake-up is one message, well under this.
    assert!(unlocked_at.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn a_redlatch_release_reaches_redisson_channel_on_a_name_with_braces() {
    let server = common::server();
    // Redisson's waiters do not mark the hold: a client that shares names
    // with them publishes on every last release.
    let client = redlatch::Client::builder(&server.url())
        .redisson_waiters(true)
        .connect()
        .await
        .unwrap();
    let name = "invoice{7}:print";
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub
        .subscribe(prefix_name("redisson_lock__channel", name))
        .await
        .unwrap();
    let guard = client.lock(name).acquire().await.unwrap();
    guard.release().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(2), async {
        use futures_util::StreamExt;
        pubsub.on_message().next().await
    })
    .await
    .expect("the release is published where Redisson listens")
    .expect("a message");
    let payload: i64 = message.get_payload().unwrap();
    assert_eq!(payload, 0, "Redisson's unlock message");
}

#[tokio::test]
async fn a_redlatch_read_release_keeps_a_redisson_reader_on_a_name_with_braces() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "table{3}";
    let field = JAVA_OWNER;
    let taken: Option<i64> = Script::new(REDISSON_READ_LOCK)
        .key(name)
        .key(format!("{}:rwlock_timeout", suffix_name(name, field)))
        .arg(30_000)
        .arg(field)
        .arg(format!("{field}:write"))
        .invoke_async(&mut java)
        .await
        .unwrap();
    assert_eq!(taken, None, "Redisson reads");
    let rw = client.read_write_lock(name);
    let read = rw.try_read().await.unwrap().expect("readers share");
    read.release().await.unwrap();
    // Redisson's reader still holds: no writer may get in.
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "a writer got in beside Redisson's reader"
    );
}

/// What redlatch publishes on a read-write lock's channel: Redisson's
/// write unlock sends its "read unlock" message `1` (its waiters then all
/// wake, readers may all proceed), its read unlock `0`.
#[tokio::test]
async fn rw_releases_publish_redissons_messages() {
    let server = common::server();
    let client = common::client(&server).await;
    for name in ["sheet", "sheet{9}"] {
        let mut pubsub = server.client().get_async_pubsub().await.unwrap();
        pubsub
            .subscribe(prefix_name("redisson_rwlock", name))
            .await
            .unwrap();
        let rw = client.read_write_lock(name);
        let write = rw.try_write().await.unwrap().expect("free");
        write.release().await.unwrap();
        let read = rw.try_read().await.unwrap().expect("free");
        read.release().await.unwrap();
        let payloads: Vec<i64> = tokio::time::timeout(Duration::from_secs(2), async {
            use futures_util::StreamExt;
            let mut messages = pubsub.on_message();
            let mut payloads = Vec::new();
            while payloads.len() < 2 {
                let message = messages.next().await.expect("a message");
                payloads.push(message.get_payload().unwrap());
            }
            payloads
        })
        .await
        .expect("both releases published");
        assert_eq!(payloads, [1, 0], "{name}: write release, then read release");
    }
}

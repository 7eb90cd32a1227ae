//! Redisson 3.24 and later unlock with a request latch: the outcome of an
//! unlock is kept under `prefixName("redisson_unlock_latch", NAME) + ":" +
//! requestId` for the command timeout, and an unlock re-sent with the same
//! request id returns that outcome without running again. The Java side
//! below is written from that documented behaviour.

use std::time::Duration;

use redis::Script;

use crate::JAVA_OWNER;
use crate::common;

/// KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch; ARGV[1] unlock
/// message, ARGV[2] lease ms, ARGV[3] owner field, ARGV[4] publish command,
/// ARGV[5] latch lifetime ms. nil: not the owner; 0: one hold dropped; 1:
/// unlocked.
const REDISSON_UNLOCK_LATCHED: &str = "\
local done = redis.call('get', KEYS[3]) \
if done ~= false then return tonumber(done) end \
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end \
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1) \
if left > 0 then \
  redis.call('pexpire', KEYS[1], ARGV[2]) \
  redis.call('set', KEYS[3], 0, 'px', ARGV[5]) \
  return 0 \
end \
redis.call('del', KEYS[1]) \
redis.call(ARGV[4], KEYS[2], ARGV[1]) \
redis.call('set', KEYS[3], 1, 'px', ARGV[5]) \
return 1";

async fn unlock(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
    request: &str,
) -> Option<i64> {
    Script::new(REDISSON_UNLOCK_LATCHED)
        .key(name)
        .key(format!("redisson_lock__channel:{{{name}}}"))
        .key(format!("redisson_unlock_latch:{{{name}}}:{request}"))
        .arg(0)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .arg("publish")
        .arg(13_500)
        .invoke_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_latched_redisson_unlock_wakes_redlatch_and_its_resend_leaves_the_new_holder_alone() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "latched";
    let taken = crate::java_lock_on(&mut java, name).await;
    assert_eq!(taken, None);
    let waiter = tokio::spawn({
        let lock = client.lock(name);
        async move { lock.acquire_within(Some(Duration::from_secs(10))).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(unlock(&mut java, name, "req-1").await, Some(1));
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the unlock message, not the lease")
        .unwrap()
        .expect("redlatch holds it");
    // The same unlock, re-sent after a lost reply: the latch answers, and
    // redlatch's hold is untouched.
    assert_eq!(unlock(&mut java, name, "req-1").await, Some(1));
    assert!(guard.is_held());
    let status = client.lock(name).status().await.unwrap();
    assert!(status.held, "{status:?}");
    assert_eq!(status.holders.len(), 1);
    // A new unlock from Redisson is refused: not its lock.
    assert_eq!(unlock(&mut java, name, "req-2").await, None);
    // Latch keys are strings: listings skip them.
    let listed = client.locks("").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    guard.release().await.unwrap();
}

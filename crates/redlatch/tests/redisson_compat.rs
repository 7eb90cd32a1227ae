//! Redisson compatibility: scripts playing the Java side, written from
//! Redisson's documented layout and behaviour (seed 003's RLock, names with
//! braces, read-write messages, semaphore counts, the 3.24+ unlock latch,
//! the fair lock's line, expirable permits, the count-down latch, wake-ups
//! both ways),
//! run against redlatch on the same names.

mod common;
#[path = "redisson_compat/fair.rs"]
mod fair;
#[path = "redisson_compat/latch.rs"]
mod latch;
#[path = "redisson_compat/names.rs"]
mod names;
#[path = "redisson_compat/permits.rs"]
mod permits;
#[path = "redisson_compat/semaphore.rs"]
mod semaphore;
#[path = "redisson_compat/unlock_latch.rs"]
mod unlock_latch;
#[path = "redisson_compat/wakeups.rs"]
mod wakeups;

use std::time::Duration;

use redis::Script;

/// Redisson's RLock acquire, as seed 003 gives it.
/// KEYS[1] lock, ARGV[1] lease ms, ARGV[2] `<uuid>:<threadId>`; nil on success, else PTTL.
const REDISSON_LOCK: &str = "if (redis.call('exists', KEYS[1]) == 0) then \
redis.call('hset', KEYS[1], ARGV[2], 1); \
redis.call('pexpire', KEYS[1], ARGV[1]); \
return nil; \
end; \
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
redis.call('hincrby', KEYS[1], ARGV[2], 1); \
redis.call('pexpire', KEYS[1], ARGV[1]); \
return nil; \
end; \
return redis.call('pttl', KEYS[1]);";

/// Redisson's RLock release, as seed 003 gives it.
/// KEYS[1] lock, KEYS[2] channel, ARGV[1] unlock message, ARGV[2] lease, ARGV[3] owner.
const REDISSON_UNLOCK: &str = "if (redis.call('exists', KEYS[1]) == 0) then \
redis.call('publish', KEYS[2], ARGV[1]); \
return 1; \
end;\
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
return nil;\
end; \
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
if (counter > 0) then \
redis.call('pexpire', KEYS[1], ARGV[2]); \
return 0; \
else \
redis.call('del', KEYS[1]); \
redis.call('publish', KEYS[2], ARGV[1]); \
return 1; \
end; \
return nil;";

/// Names of every shape both sides must agree on: plain, with a hash tag,
/// with colons, unicode, an empty hash tag (`{}`: Redisson leaves a name
/// holding `{` as it is when deriving others from it).
pub(crate) const LEGAL_NAMES: [&str; 5] =
    ["payroll", "payroll{eu}", "app:jobs:7", "ünï©ødé-锁", "x{}y"];

const JAVA_OWNER: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:57";
/// Redisson's RLock acquire on `name` by the Java thread: nil when taken.
pub(crate) async fn java_lock_on(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> Option<i64> {
    Script::new(REDISSON_LOCK)
        .key(name)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .invoke_async(conn)
        .await
        .unwrap()
}

/// Redisson's RLock release on `name` by the Java thread, publishing on the
/// channel a Redisson client derives: 1 unlocked, 0 one hold fewer, nil not its own.
pub(crate) async fn java_unlock_on(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> Option<i64> {
    Script::new(REDISSON_UNLOCK)
        .key(name)
        .key(names::prefix_name("redisson_lock__channel", name))
        .arg(0)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .invoke_async(conn)
        .await
        .unwrap()
}

async fn java_lock(conn: &mut redis::aio::MultiplexedConnection) -> Option<i64> {
    java_lock_on(conn, "shared-lock").await
}

async fn java_unlock(conn: &mut redis::aio::MultiplexedConnection) -> Option<i64> {
    java_unlock_on(conn, "shared-lock").await
}

#[tokio::test]
async fn redlatch_holder_is_seen_as_held_by_redisson_scripts() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let guard = client.lock("shared-lock").acquire().await.unwrap();
    let pttl = java_lock(&mut java)
        .await
        .expect("Redisson sees it held: returns the PTTL");
    assert!(pttl > 0 && pttl <= 30_000);
    // Redisson's unlock refuses: not its owner.
    assert_eq!(java_unlock(&mut java).await, None);
    guard.release().await.unwrap();
    assert_eq!(
        java_lock(&mut java).await,
        None,
        "free for Redisson after redlatch releases"
    );
    assert_eq!(java_unlock(&mut java).await, Some(1));
}

#[tokio::test]
async fn redisson_holder_is_seen_as_held_and_its_unlock_wakes_redlatch_waiters() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    assert_eq!(java_lock(&mut java).await, None, "Redisson takes it");
    assert_eq!(java_lock(&mut java).await, None, "and re-enters");

    let lock = client.lock("shared-lock");
    assert!(lock.try_acquire().await.unwrap().is_none());
    let status = lock.status().await.unwrap();
    assert_eq!(status.holders.len(), 1);
    assert_eq!(status.holders[0].owner, JAVA_OWNER);
    assert_eq!(status.holders[0].count, 2);

    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await.map(|guard| guard.owner().to_owned()) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        java_unlock(&mut java).await,
        Some(0),
        "first unlock only decrements"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    assert_eq!(
        java_unlock(&mut java).await,
        Some(1),
        "second unlock deletes and publishes"
    );
    let owner = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("Redisson's unlock message wakes the redlatch waiter (its lease is 30 s)")
        .unwrap()
        .unwrap();
    assert!(owner.starts_with(&client.id().to_string()));
}

/// A `MultiLock` is built on plain locks: a name a Redisson thread holds
/// keeps it from being taken (and leaves none of the others held), the
/// Redisson unlock wakes it, and while it holds, Redisson sees each name held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_and_redisson_exclude_each_other_on_every_name() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let names = ["ledger{1}", "shared-lock", "app:jobs:7"];
    assert_eq!(
        java_lock(&mut java).await,
        None,
        "Redisson takes shared-lock"
    );
    let multi = redlatch::MultiLock::new(names.map(|name| client.lock(name)));
    assert!(multi.try_acquire().await.unwrap().is_none());
    for name in ["ledger{1}", "app:jobs:7"] {
        let exists: bool = redis::AsyncCommands::exists(&mut java, name).await.unwrap();
        assert!(!exists, "{name} is left free after the refused try");
    }
    let waiting = tokio::spawn({
        let multi = multi.clone();
        async move { multi.acquire_within(Some(Duration::from_secs(10))).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(java_unlock(&mut java).await, Some(1));
    let guard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("Redisson's unlock wakes the multi-lock (lease 30 s)")
        .unwrap()
        .unwrap();
    for name in names {
        let pttl = crate::java_lock_on(&mut java, name).await;
        assert!(
            pttl.is_some_and(|pttl| pttl > 0),
            "{name} is held for Redisson"
        );
    }
    guard.release().await.unwrap();
}

/// Redisson's `RFencedLock` acquire: KEYS lock, counter; ARGV lease ms,
/// owner field. `{-1, token}` when taken (or re-entered: Redisson takes a
/// new token then too), else `{pttl, -1}`.
const REDISSON_FENCED_LOCK: &str = "\
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then \
  local token = redis.call('incr', KEYS[2]) \
  redis.call('hincrby', KEYS[1], ARGV[2], 1) \
  redis.call('pexpire', KEYS[1], ARGV[1]) \
  return {-1, token} \
end \
return {redis.call('pttl', KEYS[1]), -1}";

/// The fenced lock both ways, on every kind of name: with
/// `per_name_token_counters`, Redisson's `RFencedLock` and redlatch share
/// the counter `redisson_lock_token:{NAME}`, so tokens keep increasing
/// whichever side takes the lock, and each side sees the other's hold.
#[tokio::test]
async fn fencing_tokens_increase_across_redisson_fenced_locks_and_redlatch() {
    for name in LEGAL_NAMES {
        let server = common::server();
        let client = redlatch::Client::builder(&server.url())
            .per_name_token_counters(true)
            .connect()
            .await
            .unwrap();
        let mut java = common::admin(&server).await;
        let counter = names::prefix_name("redisson_lock_token", name);
        let java_acquire = |java: &mut redis::aio::MultiplexedConnection| {
            let mut java = java.clone();
            let counter = counter.clone();
            async move {
                let reply: Vec<i64> = Script::new(REDISSON_FENCED_LOCK)
                    .key(name)
                    .key(&counter)
                    .arg(30_000)
                    .arg(JAVA_OWNER)
                    .invoke_async(&mut java)
                    .await
                    .unwrap();
                reply
            }
        };
        let first = java_acquire(&mut java).await;
        assert_eq!(first[0], -1, "{name}: Redisson takes it");
        let lock = client.lock(name);
        assert!(
            lock.try_acquire().await.unwrap().is_none(),
            "{name}: held by Redisson"
        );
        let unlocked = crate::java_unlock_on(&mut java, name).await;
        assert_eq!(unlocked, Some(1));
        let guard = lock.try_acquire().await.unwrap().expect("free again");
        assert!(
            guard.token() as i64 > first[1],
            "{name}: redlatch's token follows Redisson's"
        );
        let busy = java_acquire(&mut java).await;
        assert!(
            busy[0] > 0 && busy[1] == -1,
            "{name}: Redisson sees redlatch's hold"
        );
        let token = guard.token() as i64;
        guard.release().await.unwrap();
        let last = java_acquire(&mut java).await;
        assert!(
            last[1] > token,
            "{name}: Redisson's token follows redlatch's"
        );
    }
}

/// Redisson's read-hold renewal, written from its documented behaviour:
/// while its own field holds, the hash's lease is set again and, when the
/// hash has other fields, every field whose value Lua reads as a number is
/// taken for a reader's hold count and that many of its timeout keys
/// (`{NAME}:<field>:rwlock_timeout:<i>`) are extended. KEYS[1] the lock
/// hash; ARGV[1] lease ms, ARGV[2] its own field, ARGV[3] the timeout keys'
/// base (`{NAME}`). 1 when renewed, 0 when its field is gone.
const REDISSON_READ_RENEW: &str = "\
if redis.call('hget', KEYS[1], ARGV[2]) == false then return 0 end \
redis.call('pexpire', KEYS[1], ARGV[1]) \
if redis.call('hlen', KEYS[1]) > 1 then \
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do \
    local count = tonumber(redis.call('hget', KEYS[1], field)) \
    if type(count) == 'number' then \
      for i = count, 1, -1 do \
        redis.call('pexpire', ARGV[3] .. ':' .. field .. ':rwlock_timeout:' .. i, ARGV[1]) \
      end \
    end \
  end \
end \
return 1";

/// Redisson's read lock takes a hash without a `mode` field for free, so a
/// Redisson reader can enter a name a redlatch `Lock` holds (both sides
/// misused on one name). Its renewal then reads every field of the hash as
/// a hold count: the plain hold's kept token must not read as a number, or
/// the renewal walks some 2^50 timeout keys and stalls the whole server.
/// Failed before: the kept token was the bare decimal token, and the
/// renewal did not answer within 5 s (the server answered BUSY).
#[tokio::test]
async fn a_redisson_reader_beside_a_redlatch_lock_does_not_stall_the_server() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "mixed-kinds";
    let guard = client.lock(name).acquire().await.unwrap();
    let field = JAVA_OWNER;
    let taken: Option<i64> = Script::new(names::REDISSON_READ_LOCK)
        .key(name)
        .key(format!(
            "{}:rwlock_timeout",
            names::suffix_name(name, field)
        ))
        .arg(30_000)
        .arg(field)
        .arg(format!("{field}:write"))
        .invoke_async(&mut java)
        .await
        .unwrap();
    assert_eq!(
        taken, None,
        "Redisson's read lock takes a hash with no mode"
    );
    let script = Script::new(REDISSON_READ_RENEW);
    let mut renew = script.key(name);
    renew.arg(30_000).arg(field).arg(format!("{{{name}}}"));
    let renewal = renew.invoke_async::<i64>(&mut java);
    let renewed = tokio::time::timeout(Duration::from_secs(5), renewal).await;
    assert!(
        matches!(renewed, Ok(Ok(1))),
        "Redisson's read renewal beside a redlatch hold: {renewed:?}"
    );
    guard.release().await.unwrap();
}

//! The fair lock with Redisson's `RFairLock` on the same names: one line,
//! one set of deadlines dated by Redisson's arithmetic (a newcomer gets the
//! deadline of the waiter before it plus the wait time W; each acquisition
//! and each waiter giving up takes W off those behind), per-waiter channels,
//! no expiry on the line. The Java side is written here from Redisson's
//! documented behaviour: its acquire with a wait, its latched unlock (3.24+),
//! and its give-up.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::{AsyncCommands, Script};

use crate::common;
use crate::names::prefix_name;

/// Redisson's default `fairLockWaitTimeout`.
const W: i64 = 300_000;

/// A wake-up by message, on a loaded machine: far below the 5 s place lease.
const PROMPT: Duration = Duration::from_secs(1);

/// Redisson's fair acquire with a wait. KEYS: lock, line, deadlines; ARGV:
/// lease ms, owner field, wait time W ms, the client's clock in ms.
/// nil when taken (or re-entered); otherwise how long to wait, in ms.
const JAVA_FAIR_ACQUIRE: &str = r"
local now, w = tonumber(ARGV[4]), tonumber(ARGV[3])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local date = redis.call('zscore', KEYS[3], head)
  if date == false or tonumber(date) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (head == false or head == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -w, waiter)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + w + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl";

/// Redisson's latched fair unlock. KEYS: lock, line, deadlines, lock
/// channel, unlock latch; ARGV: message (0), lease ms, owner field, the
/// client's clock, publish command, latch lifetime ms. nil: not the owner.
const JAVA_FAIR_UNLOCK: &str = r"
local latched = redis.call('get', KEYS[5])
if latched ~= false then return tonumber(latched) end
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local date = redis.call('zscore', KEYS[3], head)
  if date == false or tonumber(date) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local function wake_first()
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_first()
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
wake_first()
return 1";

/// Redisson's give-up after a timed-out wait. KEYS: line, deadlines; ARGV:
/// owner field, W. Everyone behind the owner moves one place up.
const JAVA_FAIR_GIVE_UP: &str = r"
local line = redis.call('lrange', KEYS[1], 0, -1)
local behind = false
for _, waiter in ipairs(line) do
  if behind then redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), waiter) end
  if waiter == ARGV[1] then behind = true end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])";

/// One Java thread using `RFairLock` on `name`.
struct JavaThread {
    name: String,
    field: String,
}

impl JavaThread {
    fn new(name: &str, thread: u32) -> JavaThread {
        JavaThread {
            name: name.to_owned(),
            field: format!("6b1d3c2e-0f4a-4e8b-9c7d-2a5e8f1b3c4d:{thread}"),
        }
    }

    fn line(&self) -> String {
        prefix_name("redisson_lock_queue", &self.name)
    }

    fn deadlines(&self) -> String {
        prefix_name("redisson_lock_timeout", &self.name)
    }

    /// The channel this thread listens on while it waits.
    fn channel(&self) -> String {
        format!(
            "{}:{}",
            prefix_name("redisson_lock__channel", &self.name),
            self.field
        )
    }

    /// `tryLock` with a wait dated by `w`: `None` when taken.
    async fn acquire(&self, java: &mut redis::aio::MultiplexedConnection, w: i64) -> Option<i64> {
        Script::new(JAVA_FAIR_ACQUIRE)
            .key(&self.name)
            .key(self.line())
            .key(self.deadlines())
            .arg(30_000)
            .arg(&self.field)
            .arg(w)
            .arg(client_clock())
            .invoke_async(java)
            .await
            .unwrap()
    }

    async fn unlock(&self, java: &mut redis::aio::MultiplexedConnection) -> Option<i64> {
        let request = uuid::Uuid::new_v4();
        Script::new(JAVA_FAIR_UNLOCK)
            .key(&self.name)
            .key(self.line())
            .key(self.deadlines())
            .key(prefix_name("redisson_lock__channel", &self.name))
            .key(format!(
                "{}:{request}",
                prefix_name("redisson_unlock_latch", &self.name)
            ))
            .arg(0)
            .arg(30_000)
            .arg(&self.field)
            .arg(client_clock())
            .arg("publish")
            .arg(3_000)
            .invoke_async(java)
            .await
            .unwrap()
    }

    async fn give_up(&self, java: &mut redis::aio::MultiplexedConnection, w: i64) {
        let _: () = Script::new(JAVA_FAIR_GIVE_UP)
            .key(self.line())
            .key(self.deadlines())
            .arg(&self.field)
            .arg(w)
            .invoke_async(java)
            .await
            .unwrap();
    }
}

fn client_clock() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn line(admin: &mut redis::aio::MultiplexedConnection, thread: &JavaThread) -> Vec<String> {
    admin.lrange(thread.line(), 0, -1).await.unwrap()
}

/// Waits (up to 5 s) until the line holds `len` waiters.
async fn line_reaches(
    java: &redis::aio::MultiplexedConnection,
    thread: &JavaThread,
    len: usize,
) -> bool {
    common::eventually(Duration::from_secs(5), || {
        let mut java = java.clone();
        async move { line(&mut java, thread).await.len() == len }
    })
    .await
}

async fn deadline(
    admin: &mut redis::aio::MultiplexedConnection,
    thread: &JavaThread,
    field: &str,
) -> i64 {
    let score: Option<f64> = admin.zscore(thread.deadlines(), field).await.unwrap();
    score.unwrap_or_else(|| panic!("{field} has no deadline")) as i64
}

/// Waits for a message on `channel` and says how long it took since `from`.
/// Messages on other channels are skipped: a redlatch waiter's attempt that
/// finds the lock free repeats the wake-up of whoever is first.
async fn woken(pubsub: &mut redis::aio::PubSub, channel: &str, from: Instant) -> Duration {
    let mut messages = pubsub.on_message();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(2), messages.next())
            .await
            .unwrap_or_else(|_| panic!("no wake-up on {channel} within 2 s"))
            .expect("a message");
        if message.get_channel_name() == channel {
            return from.elapsed();
        }
    }
}

/// Order and wake-ups across the two sides, on a name with and without a
/// brace: Java J0 holds; J1 (Java), R2 (redlatch), J3 (Java) queue; each
/// release wakes exactly the next by its message (within 1 s: the
/// place lease, the only timer that could also wake a redlatch waiter, is 5 s); the deadlines follow
/// Redisson's arithmetic; nothing expires the line. On every kind of legal
/// name: plain, braced, colons, unicode, an empty hash tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_line_across_redisson_and_redlatch_keeps_order_and_wakes_each_by_its_message() {
    for name in crate::LEGAL_NAMES {
        let server = common::server();
        let client = common::client(&server).await;
        let mut java = common::admin(&server).await;
        let j0 = JavaThread::new(name, 10);
        let j1 = JavaThread::new(name, 11);
        let j3 = JavaThread::new(name, 13);

        assert_eq!(j0.acquire(&mut java, W).await, None, "{name}: J0 takes it");
        let ttl = j1.acquire(&mut java, W).await.expect("J1 queues");
        assert!(ttl > 0, "{name}: J1 waits for the lease, {ttl} ms");
        let lock = client.fair_lock(name);
        let r2 = tokio::spawn({
            let lock = lock.clone();
            async move { lock.acquire().await }
        });
        assert!(
            line_reaches(&java, &j1, 2).await,
            "{name}: the redlatch waiter joins the line"
        );
        assert!(j3.acquire(&mut java, W).await.is_some(), "J3 queues");
        let order = line(&mut java, &j1).await;
        assert_eq!(order.len(), 3);
        assert_eq!((&order[0], &order[2]), (&j1.field, &j3.field), "{name}");
        let r2_field = order[1].clone();
        assert!(r2_field.starts_with(&client.id().to_string()));

        // Redisson's arithmetic: each place is dated W after the one before.
        let (d1, d2, d3) = (
            deadline(&mut java, &j1, &j1.field).await,
            deadline(&mut java, &j1, &r2_field).await,
            deadline(&mut java, &j1, &j3.field).await,
        );
        assert_eq!((d2 - d1, d3 - d2), (W, W), "{name}: places W apart");
        // Redisson never sets an expiry on the line or its deadlines.
        let line_ttl: i64 = java.pttl(j1.line()).await.unwrap();
        let deadlines_ttl: i64 = java.pttl(j1.deadlines()).await.unwrap();
        assert_eq!((line_ttl, deadlines_ttl), (-1, -1), "{name}: no expiry");

        let mut pubsub = server.client().get_async_pubsub().await.unwrap();
        pubsub.subscribe(j1.channel()).await.unwrap();
        pubsub.subscribe(j3.channel()).await.unwrap();

        // J0's unlock wakes J1 only; J1 takes it, moving R2 and J3 up by W.
        let at = Instant::now();
        assert_eq!(j0.unlock(&mut java).await, Some(1));
        let took = woken(&mut pubsub, &j1.channel(), at).await;
        assert!(took < PROMPT, "{name}: woken in {took:?}");
        assert_eq!(j1.acquire(&mut java, W).await, None, "{name}: J1 takes it");
        assert_eq!(deadline(&mut java, &j1, &r2_field).await, d1, "{name}");
        assert_eq!(deadline(&mut java, &j1, &j3.field).await, d2, "{name}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!r2.is_finished(), "{name}: R2 waits while J1 holds");

        // J1's unlock wakes R2, which takes it ahead of J3.
        let at = Instant::now();
        assert_eq!(j1.unlock(&mut java).await, Some(1));
        let guard = tokio::time::timeout(Duration::from_secs(2), r2)
            .await
            .expect("R2 is woken")
            .unwrap()
            .unwrap();
        let took = at.elapsed();
        assert!(took < PROMPT, "{name}: R2 took {took:?}");
        assert_eq!(line(&mut java, &j1).await, vec![j3.field.clone()]);
        assert_eq!(deadline(&mut java, &j1, &j3.field).await, d1, "{name}");
        assert!(j3.acquire(&mut java, W).await.is_some(), "{name}: R2 holds");

        // R2's release wakes J3.
        let at = Instant::now();
        guard.release().await.unwrap();
        let took = woken(&mut pubsub, &j3.channel(), at).await;
        assert!(took < PROMPT, "{name}: woken in {took:?}");
        assert_eq!(j3.acquire(&mut java, W).await, None, "{name}: J3 takes it");
    }
}

/// A redlatch waiter that gives up moves the Java waiters behind it up by
/// its own wait time, as Redisson's give-up does; and the other way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn giving_up_moves_the_waiters_behind_up_on_both_sides() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "audit{2}";
    let holder = JavaThread::new(name, 1);
    let behind = JavaThread::new(name, 2);
    let quitter = JavaThread::new(name, 3);
    assert_eq!(holder.acquire(&mut java, W).await, None);

    // A redlatch waiter with a 400 ms timeout dates its place with it.
    let lock = client.fair_lock(name);
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_within(Some(Duration::from_millis(400))).await }
    });
    assert!(line_reaches(&java, &holder, 1).await);
    let redlatch_field = line(&mut java, &holder).await[0].clone();
    let first = deadline(&mut java, &holder, &redlatch_field).await;
    assert!(behind.acquire(&mut java, W).await.is_some());
    let before = deadline(&mut java, &holder, &behind.field).await;
    assert_eq!(before - first, W);
    let gave_up = waiting.await.unwrap();
    assert!(gave_up.is_err(), "the redlatch wait times out");
    assert_eq!(line(&mut java, &holder).await, vec![behind.field.clone()]);
    assert_eq!(
        deadline(&mut java, &holder, &behind.field).await,
        before - 400,
        "moved up by the redlatch waiter's wait time"
    );

    // A Java waiter ahead of a redlatch waiter gives up: the redlatch
    // waiter moves up by the Java waiter's W, and keeps waiting.
    assert!(quitter.acquire(&mut java, W).await.is_some());
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    assert!(line_reaches(&java, &holder, 3).await);
    let redlatch_field = line(&mut java, &holder).await[2].clone();
    let before = deadline(&mut java, &holder, &redlatch_field).await;
    quitter.give_up(&mut java, W).await;
    assert_eq!(
        deadline(&mut java, &holder, &redlatch_field).await,
        before - W
    );
    behind.give_up(&mut java, W).await;
    assert_eq!(holder.unlock(&mut java).await, Some(1));
    let guard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the redlatch waiter, now first, is woken")
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
}

/// A Java waiter that died (it never tries again) is dropped once its
/// deadline passes, by Redisson's rule, and a redlatch waiter behind it then
/// gets the lock; a live Java waiter is never dropped by redlatch's own
/// sign-of-life rule, however long it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_java_waiters_go_at_their_deadline_and_live_ones_stay() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "ledger";
    let live = JavaThread::new(name, 1);
    let dead = JavaThread::new(name, 2);

    // A redlatch holder with a short fixed lease; a Java waiter queues with
    // a 300 ms wait (tryLock(300ms)) and dies.
    let holder = client
        .fair_lock(name)
        .with_lease(Duration::from_millis(400))
        .acquire()
        .await
        .unwrap();
    assert!(dead.acquire(&mut java, 300).await.is_some());
    let waiter = tokio::spawn({
        let lock = client
            .fair_lock(name)
            .with_place_lease(Duration::from_millis(300));
        async move { lock.acquire().await }
    });
    let started = Instant::now();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the dead Java waiter is dropped at its deadline")
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the lease and W ran out"
    );
    assert!(line(&mut java, &dead).await.is_empty());
    drop(holder);

    // A live Java waiter, dated with W = 5 min, stays first through many
    // redlatch attempts whose signs of life last 60 ms.
    assert!(live.acquire(&mut java, W).await.is_some());
    let impatient = client
        .fair_lock(name)
        .with_place_lease(Duration::from_millis(60));
    for _ in 0..10 {
        let _ = impatient
            .acquire_within(Some(Duration::from_millis(100)))
            .await
            .unwrap_err();
    }
    assert_eq!(line(&mut java, &live).await, vec![live.field.clone()]);
    guard.release().await.unwrap();
    assert_eq!(live.acquire(&mut java, W).await, None, "its turn came");
}

/// A redlatch release hands the lock to a redlatch waiter first in line
/// (the hold written to it in the release, before it runs anything) and
/// moves the Java waiter behind it up by W, as a take would; a Java waiter
/// first in line is only woken with Redisson's '0' and takes the free lock
/// with its own script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_over_to_redlatch_waiters_and_only_wakes_java_ones() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut java = common::admin(&server).await;
    let name = "handed";
    let j2 = JavaThread::new(name, 2);
    let r0 = client.fair_lock(name).acquire().await.unwrap();
    let r1 = tokio::spawn({
        let lock = client.fair_lock(name);
        async move { lock.acquire().await }
    });
    assert!(line_reaches(&java, &j2, 1).await);
    let r1_field = line(&mut java, &j2).await[0].clone();
    assert!(j2.acquire(&mut java, W).await.is_some(), "J2 queues");
    let before = deadline(&mut java, &j2, &j2.field).await;
    let mut pubsub = server.client().get_async_pubsub().await.unwrap();
    pubsub.subscribe(j2.channel()).await.unwrap();

    r0.release().await.unwrap();
    // Handed over in the release itself: R1 holds before it ran anything.
    let holds: bool = java.hexists(name, &r1_field).await.unwrap();
    assert!(holds, "the release wrote the hold to R1");
    assert_eq!(line(&mut java, &j2).await, vec![j2.field.clone()]);
    assert_eq!(deadline(&mut java, &j2, &j2.field).await, before - W);
    assert!(j2.acquire(&mut java, W).await.is_some(), "R1 holds");
    let r1 = tokio::time::timeout(Duration::from_secs(2), r1)
        .await
        .expect("R1 gets the guard of the hold handed to it")
        .unwrap()
        .unwrap();
    assert_eq!(r1.owner(), r1_field);

    // R1's release only wakes J2: the lock is free until J2 takes it.
    r1.release().await.unwrap();
    let exists: bool = java.exists(name).await.unwrap();
    assert!(!exists, "a Java waiter is never handed the lock");
    let mut messages = pubsub.on_message();
    let message = tokio::time::timeout(Duration::from_secs(2), messages.next())
        .await
        .expect("J2 is woken")
        .unwrap();
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    drop(messages);
    assert_eq!(j2.acquire(&mut java, W).await, None, "J2 takes it");
    assert_eq!(j2.unlock(&mut java).await, Some(1));
}

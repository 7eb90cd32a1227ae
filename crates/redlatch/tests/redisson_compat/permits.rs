//! The permit-expirable semaphore with Redisson's `RPermitExpirableSemaphore`
//! on the same names: the count `NAME`, the expiries `{NAME}:timeout` whose
//! members are permit ids as 16 raw bytes (both sides show them as 32 hex
//! digits), the channel `redisson_sc:{NAME}`. The Java side is written here
//! from Redisson's documented behaviour: its acquire with a lease, its
//! release by id, and its `setPermits`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{AsyncCommands, Script};

use crate::common;
use crate::names::{prefix_name, suffix_name};

/// Redisson's acquire of one permit with a lease. KEYS: count, expiries,
/// channel; ARGV: 1, expiry date ms, the client's clock, the never-expires
/// date, publish command, the permit id's raw bytes. 'OK' when taken.
const JAVA_PERMIT_ACQUIRE: &str = r"
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local count = redis.call('incrby', KEYS[1], #expired)
  if tonumber(count) > 0 then redis.call(ARGV[5], KEYS[3], count) end
end
local count = redis.call('get', KEYS[1])
if count ~= false and tonumber(count) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  return 'OK'
end
return nil";

/// Redisson's release by id. KEYS: count, channel, expiries; ARGV: the id's
/// raw bytes, 1, the client's clock, publish command. 1 released in time,
/// 0 unknown or expired.
const JAVA_PERMIT_RELEASE: &str = r"
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) ~= 1 then return 0 end
local count = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], count)
if tonumber(expiry) <= tonumber(ARGV[3]) then return 0 end
return 1";

/// Redisson's `setPermits`: the total (free + held) becomes ARGV[1].
/// KEYS: count, channel, expiries; ARGV: permits, publish command.
const JAVA_SET_PERMITS: &str = r"
local free = redis.call('get', KEYS[1])
if free == false then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return
end
local total = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(free)
if total == tonumber(ARGV[1]) then return end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
redis.call(ARGV[2], KEYS[2], ARGV[1])";

fn client_clock() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// 32 hex digits, as a Redisson user sees a permit id, to its raw bytes.
fn raw(id: &str) -> Vec<u8> {
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect()
}

struct JavaSide<'a> {
    name: &'a str,
}

impl JavaSide<'_> {
    fn expiries(&self) -> String {
        suffix_name(self.name, "timeout")
    }

    async fn acquire(
        &self,
        java: &mut redis::aio::MultiplexedConnection,
        id: &str,
        lease_ms: i64,
    ) -> bool {
        let now = client_clock();
        let taken: Option<String> = Script::new(JAVA_PERMIT_ACQUIRE)
            .key(self.name)
            .key(self.expiries())
            .key(prefix_name("redisson_sc", self.name))
            .arg(1)
            .arg(now + lease_ms)
            .arg(now)
            .arg(922_337_203_685_477_i64)
            .arg("publish")
            .arg(raw(id))
            .invoke_async(java)
            .await
            .unwrap();
        taken.is_some()
    }

    async fn release(&self, java: &mut redis::aio::MultiplexedConnection, id: &str) -> i64 {
        Script::new(JAVA_PERMIT_RELEASE)
            .key(self.name)
            .key(prefix_name("redisson_sc", self.name))
            .key(self.expiries())
            .arg(raw(id))
            .arg(1)
            .arg(client_clock())
            .arg("publish")
            .invoke_async(java)
            .await
            .unwrap()
    }

    async fn set_permits(&self, java: &mut redis::aio::MultiplexedConnection, permits: i64) {
        let () = Script::new(JAVA_SET_PERMITS)
            .key(self.name)
            .key(prefix_name("redisson_sc", self.name))
            .key(self.expiries())
            .arg(permits)
            .arg("publish")
            .invoke_async(java)
            .await
            .unwrap();
    }

    /// Free permits plus held ones: what `setPermits` calls the total.
    async fn total(&self, java: &mut redis::aio::MultiplexedConnection) -> i64 {
        let free: i64 = java.get(self.name).await.unwrap();
        let held: i64 = java.zcard(self.expiries()).await.unwrap();
        free + held
    }
}

/// Permits taken on one side are seen, released and reclaimed by the other,
/// on every kind of legal name; `setPermits` on the Java side finds
/// the total it expects (no permit created), and the total stays 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_taken_on_either_side_are_released_and_reclaimed_by_the_other() {
    for name in crate::LEGAL_NAMES {
        let server = common::server();
        // Renewed every 300 ms, so the watchdog soon sees a permit gone.
        let client = common::client_with_lease(&server, Duration::from_millis(900)).await;
        let mut java = common::admin(&server).await;
        let side = JavaSide { name };
        let slots = client.permit_semaphore(name);
        assert!(slots.try_set_permits(3).await.unwrap());

        let java_id = "0123456789abcdef0123456789abcdef";
        assert!(side.acquire(&mut java, java_id, 30_000).await, "{name}");
        assert_eq!(slots.available_permits().await.unwrap(), 2, "{name}");

        // A redlatch permit, released by the Java side by its id.
        let permit = slots.try_acquire().await.unwrap().expect("a permit");
        assert_eq!(permit.id().len(), 32);
        let stored: Option<f64> = java
            .zscore(side.expiries(), raw(permit.id()))
            .await
            .unwrap();
        assert!(stored.is_some(), "{name}: stored as the id's raw bytes");
        assert_eq!(side.release(&mut java, permit.id()).await, 1, "{name}");
        tokio::time::timeout(Duration::from_secs(5), permit.lost())
            .await
            .expect("the watchdog sees the permit gone");

        // Redisson's setPermits(3) finds a total of 3: no permit created.
        side.set_permits(&mut java, 3).await;
        assert_eq!(side.total(&mut java).await, 3, "{name}");
        assert_eq!(slots.available_permits().await.unwrap(), 2, "{name}");

        // A Java permit whose lease ran out is reclaimed by redlatch.
        let short_id = "fedcba9876543210fedcba9876543210";
        assert!(side.acquire(&mut java, short_id, 100).await, "{name}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let first = slots.try_acquire().await.unwrap().expect("one");
        let second = slots
            .try_acquire()
            .await
            .unwrap()
            .expect("the reclaimed one");
        assert!(slots.try_acquire().await.unwrap().is_none(), "{name}");
        assert_eq!(side.total(&mut java).await, 3, "{name}");

        // A redlatch permit whose fixed lease ran out is reclaimed by Java.
        second.release().await.unwrap();
        let brief = slots
            .clone()
            .with_lease(Duration::from_millis(100))
            .acquire()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let other_id = "00112233445566778899aabbccddeeff";
        assert!(side.acquire(&mut java, other_id, 30_000).await, "{name}");
        assert!(!brief.is_held(), "{name}: reclaimed");
        assert_eq!(side.total(&mut java).await, 3, "{name}");

        // And Redisson's permit goes back by its id from redlatch's count.
        assert_eq!(side.release(&mut java, other_id).await, 1);
        assert_eq!(side.release(&mut java, java_id).await, 1);
        first.release().await.unwrap();
        assert_eq!(slots.available_permits().await.unwrap(), 3, "{name}");
    }
}

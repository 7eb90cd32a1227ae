//! Helpers shared by the integration tests: a fresh redis-server per test
//! (from the testkit) and clients with short timeouts.
#![allow(dead_code)]

use std::time::Duration;

use redlatch::Client;
use testkit::RedisServer;

/// Starts a throwaway redis-server on a free port.
pub fn server() -> RedisServer {
    RedisServer::start().expect("start redis-server (is it installed? see README)")
}

/// A client with timeouts short enough for fault tests.
pub async fn client(server: &RedisServer) -> Client {
    client_with_lease(server, redlatch::Settings::DEFAULT_LEASE).await
}

/// A client whose watchdog lease is `lease`.
pub async fn client_with_lease(server: &RedisServer, lease: Duration) -> Client {
    client_at(&server.url(), lease).await
}

/// A client on `url` (a proxy's, say) with the test timeouts and a watchdog
/// lease of `lease`.
pub async fn client_at(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .connect()
        .await
        .expect("connect to the test server")
}

/// As [`client`], with deadlock detection turned on (it is off by default).
pub async fn detecting_client(server: &RedisServer) -> Client {
    detecting_client_at(&server.url(), redlatch::Settings::DEFAULT_LEASE).await
}

/// As [`client_at`], with deadlock detection turned on.
pub async fn detecting_client_at(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .deadlock_detection(true)
        .connect()
        .await
        .expect("connect to the test server")
}

/// As [`client_at`], with scripts run by EVALSHA rather than as functions:
/// for tests of what a flushed script cache does.
pub async fn evalsha_client_at(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20))
        .default_lease(lease)
        .script_functions(false)
        .connect()
        .await
        .expect("connect to the test server")
}

/// An admin connection for looking at what the library wrote.
pub async fn admin(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    // redis-rs gives up on a reply after 500 ms by default; a test's own
    // reads must not fail for a loaded machine, only for a wrong answer.
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(10)));
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("admin connection")
}

/// Polls `check` every 10 ms until it is true or `limit` passes; returns whether it became true.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Subscribers of a channel, as the server counts them.
pub async fn subscribers(conn: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .expect("PUBSUB NUMSUB");
    reply.1
}

/// Closes every subscription connection on the server (`CLIENT KILL TYPE
/// pubsub`): how the tests cut waiters off their wake-up messages. Returns
/// how many were closed.
pub async fn kill_subscriptions(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(conn)
        .await
        .unwrap()
}

/// The ids of the connections that track keys (`flags` with `t`): the
/// loss watch's.
pub async fn tracking_connection_ids(admin: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(admin)
        .await
        .unwrap();
    list.lines()
        .filter(|line| {
            line.split(' ')
                .any(|pair| pair.strip_prefix("flags=").is_some_and(|f| f.contains('t')))
        })
        .filter_map(|line| {
            line.split(' ')
                .find_map(|pair| pair.strip_prefix("id="))
                .map(str::to_owned)
        })
        .collect()
}

/// Starts `n` independent redis-servers (the masters of a Redlock).
pub fn masters(n: usize) -> testkit::Servers {
    testkit::Servers::start(n).expect("start redis-servers (is redis-server installed? see README)")
}

/// A small xorshift generator: random cancellation points without a
/// dependency. The seed is printed by the tests that use it.
pub struct Rng(u64);

impl Rng {
    /// A generator that replays `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Seeded from `REDLATCH_TEST_SEED` when set, else from the clock.
    pub fn from_env() -> Rng {
        let seed = std::env::var("REDLATCH_TEST_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |elapsed| elapsed.as_nanos() as u64)
            });
        eprintln!("REDLATCH_TEST_SEED={seed}");
        Rng(seed | 1)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// Hold counts left in the lock hashes whose names start with `prefix`
/// (the `mode` field of a read-write lock aside, and holder records, which
/// are not locks): holds nobody will give back.
pub async fn holds_left(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> i64 {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(conn)
        .await
        .expect("KEYS");
    let mut left = 0;
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("TYPE");
        if kind != "hash" || key.contains("redlatch_holder:") {
            continue;
        }
        let fields: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("HGETALL");
        left += fields
            .iter()
            .filter(|(field, _)| field != "mode" && field != "redlatch_token")
            .map(|(_, count)| count.parse::<i64>().unwrap_or(0))
            .sum::<i64>();
    }
    left
}

/// Polls `measure` until it reads 0 or has not changed for 500 ms (every
/// background release has landed), at most `limit`; returns the last reading.
pub async fn settled<F, Fut>(limit: Duration, mut measure: F) -> i64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = i64>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = measure().await;
    let mut since = tokio::time::Instant::now();
    loop {
        if last == 0 || tokio::time::Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        let now = measure().await;
        if now != last {
            last = now;
            since = tokio::time::Instant::now();
        } else if since.elapsed() >= Duration::from_millis(500) {
            return last;
        }
    }
}

/// Script calls the server has run so far: FCALL (the function library),
/// EVALSHA and EVAL.
pub async fn script_calls(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(admin, &["fcall", "evalsha", "eval"]).await
}

/// Calls of `commands` (lower case, as `INFO commandstats` names them) the
/// server has run so far, those of scripts included.
pub async fn command_calls(
    admin: &mut redis::aio::MultiplexedConnection,
    commands: &[&str],
) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            if !commands.contains(&name) {
                return None;
            }
            stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Every key, once the holder records of ended holds are gone (each client
/// deletes its record within a second of its last hold; docs/REDIS-DATA.md,
/// "Holder records"): what a test that looks for leftovers compares. A
/// record still there after 5 s is returned with the rest, and fails it.
pub async fn keys_once_holders_unnamed(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(conn)
            .await
            .expect("KEYS");
        let named = keys.iter().any(|key| key.contains("redlatch_holder:"));
        if !named || tokio::time::Instant::now() >= deadline {
            return keys;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many panics this test process has seen outside its tests' own files
/// (in redlatch or a library it uses: a task that panicked, say), counted
/// from the first call. A test compares two readings.
pub fn library_panics() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static COUNTING: std::sync::Once = std::sync::Once::new();
    COUNTING.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_a_test = info
                .location()
                .is_some_and(|location| location.file().contains("tests/"));
            if !in_a_test {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
    PANICS.load(Ordering::SeqCst)
}

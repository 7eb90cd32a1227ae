//! The locks under test behind one interface: redlatch, its peers, and the
//! raw recipe, each acquiring and releasing a named key.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::clock::now_ns;

/// Lease every contender asks for: redlatch's default, so the watchdog-free
/// peers and the raw recipe hold their keys as long.
pub const LEASE: Duration = redlatch::Settings::DEFAULT_LEASE;

/// The raw recipe's compare-and-delete (hashed once, sent by EVALSHA).
static RAW_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end",
    )
});

/// Connection settings without a response timeout: on a loaded machine a
/// slow answer is a slow figure, not an error.
pub fn no_timeout() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new().set_response_timeout(None)
}

/// A connection for the harness's own commands (SCRIPT LOAD, INFO, FLUSHALL).
pub async fn admin_connection(
    server: &testkit::RedisServer,
) -> Result<MultiplexedConnection, String> {
    server
        .client()
        .get_multiplexed_async_connection_with_config(&no_timeout())
        .await
        .map_err(|error| format!("connect: {error}"))
}

/// Which lock implementation a measurement drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Kind {
    /// redlatch's default lock, one `Client` (one multiplexed connection plus
    /// a subscription connection).
    Redlatch,
    /// redlatch's default lock with its scripts sent by EVALSHA rather than
    /// as functions of its library (`ClientBuilder::script_functions(false)`),
    /// to show what functions cost or save.
    RedlatchEvalsha,
    /// rslock 0.10: async, one multiplexed connection per master, fan-out in
    /// parallel, 3 tries with a random 0–200 ms pause between them.
    Rslock,
    /// redlock 2.0: blocking, a new connection per command, masters in turn,
    /// 3 tries with a random 0–200 ms pause; run under `spawn_blocking`.
    Redlock,
    /// `SET key token NX PX` then a Lua compare-and-delete, on one redis-rs
    /// multiplexed connection: the least a lock with an owner token costs.
    /// Does not wait: a taken key is an error.
    Raw,
    /// redlatch's fair lock (`Client::fair_lock`): one line of waiters
    /// across every client, first come, first served.
    Fair,
    /// redlatch's token lock (`Client::token_lock`): `SET NX PX GET`, and a
    /// `DELIFEQ` (or `DELEX … IFEQ`) release where the server has it, a
    /// script release elsewhere.
    Token,
    /// Two `PING`s per cycle on one redis-rs multiplexed connection: no
    /// lock, the least the server spends on any cycle of two round trips
    /// (its reads, parsing and replies), the floor under every lock here.
    Pings,
}

impl Kind {
    /// Column heading in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Redlatch => "redlatch",
            Kind::RedlatchEvalsha => "redlatch by EVALSHA",
            Kind::Rslock => "rslock 0.10",
            Kind::Redlock => "redlock 2.0",
            Kind::Raw => "raw SET NX PX + Lua del",
            Kind::Fair => "redlatch fair lock",
            Kind::Token => "redlatch token lock",
            Kind::Pings => "two PINGs (no lock)",
        }
    }
}

/// A connected lock implementation.
#[derive(Clone)]
pub enum Locker {
    Redlatch(redlatch::Client),
    /// redlatch's Redlock over several masters.
    Quorum(redlatch::Redlock),
    Fair(redlatch::Client),
    Token(redlatch::Client),
    Rslock(rslock::LockManager),
    Redlock(Arc<redlock::RedLock>),
    Raw(MultiplexedConnection),
    Pings(MultiplexedConnection),
}

/// A held lock, to hand back to [`Locker::release`].
pub enum Held {
    Redlatch(redlatch::Guard),
    Token(redlatch::TokenGuard),
    Quorum(redlatch::RedlockGuard),
    Rslock(rslock::Lock),
    Redlock { resource: Vec<u8>, val: Vec<u8> },
    Raw { key: String, token: String },
    Pings,
}

impl Locker {
    /// Connects `kind` to the masters at `urls` (one URL: a single master).
    pub async fn connect(kind: Kind, urls: &[String]) -> Result<Locker, String> {
        let first = urls.first().ok_or("no Redis URL given")?;
        match kind {
            Kind::Redlatch if urls.len() > 1 => redlatch::Redlock::connect(urls)
                .await
                .map(Locker::Quorum)
                .map_err(|error| format!("redlatch Redlock connect: {error}")),
            Kind::Redlatch => redlatch::Client::connect(first)
                .await
                .map(Locker::Redlatch)
                .map_err(|error| format!("redlatch connect: {error}")),
            Kind::RedlatchEvalsha => redlatch::Client::builder(first)
                .script_functions(false)
                .connect()
                .await
                .map(Locker::Redlatch)
                .map_err(|error| format!("redlatch connect: {error}")),
            Kind::Fair => {
                if urls.len() != 1 {
                    return Err("the fair lock uses one master".to_owned());
                }
                redlatch::Client::connect(first)
                    .await
                    .map(Locker::Fair)
                    .map_err(|error| format!("redlatch connect: {error}"))
            }
            Kind::Token => {
                if urls.len() != 1 {
                    return Err("the token lock uses one master".to_owned());
                }
                redlatch::Client::connect(first)
                    .await
                    .map(Locker::Token)
                    .map_err(|error| format!("redlatch connect: {error}"))
            }
            Kind::Rslock => Ok(Locker::Rslock(rslock::LockManager::new(urls.to_vec()))),
            Kind::Redlock => Ok(Locker::Redlock(Arc::new(redlock::RedLock::new(
                urls.to_vec(),
            )))),
            Kind::Raw | Kind::Pings => {
                if urls.len() != 1 {
                    return Err("the raw recipe uses one master".to_owned());
                }
                let client = redis::Client::open(first.as_str())
                    .map_err(|error| format!("raw client: {error}"))?;
                let conn = client
                    .get_multiplexed_async_connection_with_config(&no_timeout())
                    .await
                    .map_err(|error| format!("raw connect: {error}"))?;
                Ok(match kind {
                    Kind::Pings => Locker::Pings(conn),
                    _ => Locker::Raw(conn),
                })
            }
        }
    }

    /// Acquires `key`, waiting the implementation's own way, until the
    /// monotonic clock passes `give_up_ns`: then `Ok(None)`.
    pub async fn acquire(&self, key: &str, give_up_ns: u64) -> Result<Option<Held>, String> {
        match self {
            Locker::Redlatch(client) => {
                let wait = Duration::from_nanos(give_up_ns.saturating_sub(now_ns()));
                // Cancelling a waiting acquire leaves nothing behind in Redis.
                match tokio::time::timeout(wait, client.lock(key).acquire()).await {
                    Ok(Ok(guard)) => Ok(Some(Held::Redlatch(guard))),
                    Ok(Err(error)) => Err(format!("redlatch acquire: {error}")),
                    Err(_) => Ok(None),
                }
            }
            Locker::Quorum(redlock) => {
                let wait = Duration::from_nanos(give_up_ns.saturating_sub(now_ns()));
                match tokio::time::timeout(wait, redlock.lock(key).acquire()).await {
                    Ok(Ok(guard)) => Ok(Some(Held::Quorum(guard))),
                    Ok(Err(error)) => Err(format!("redlatch Redlock acquire: {error}")),
                    Err(_) => Ok(None),
                }
            }
            Locker::Fair(client) => {
                let wait = Duration::from_nanos(give_up_ns.saturating_sub(now_ns()));
                // Cancelling leaves the line at once; nothing stays in Redis.
                match tokio::time::timeout(wait, client.fair_lock(key).acquire()).await {
                    Ok(Ok(guard)) => Ok(Some(Held::Redlatch(guard))),
                    Ok(Err(error)) => Err(format!("redlatch fair acquire: {error}")),
                    Err(_) => Ok(None),
                }
            }
            Locker::Token(client) => {
                let wait = Duration::from_nanos(give_up_ns.saturating_sub(now_ns()));
                match tokio::time::timeout(wait, client.token_lock(key).acquire()).await {
                    Ok(Ok(guard)) => Ok(Some(Held::Token(guard))),
                    Ok(Err(error)) => Err(format!("redlatch token acquire: {error}")),
                    Err(_) => Ok(None),
                }
            }
            Locker::Rslock(manager) => loop {
                // `lock` makes its 3 tries with random pauses; `acquire`
                // would loop the same way, but without a way to give up.
                match manager.lock(key, LEASE).await {
                    Ok(lock) => return Ok(Some(Held::Rslock(lock))),
                    Err(rslock::LockError::Unavailable) => {}
                    Err(error) => return Err(format!("rslock lock: {error}")),
                }
                if now_ns() >= give_up_ns {
                    return Ok(None);
                }
            },
            Locker::Redlock(manager) => {
                let manager = Arc::clone(manager);
                let resource = key.as_bytes().to_vec();
                tokio::task::spawn_blocking(move || {
                    loop {
                        match manager.lock(&resource, LEASE.as_millis() as usize) {
                            Ok(Some(lock)) => {
                                return Ok(Some(Held::Redlock {
                                    resource: lock.resource,
                                    val: lock.val,
                                }));
                            }
                            Ok(None) => {}
                            Err(error) => return Err(format!("redlock lock: {error}")),
                        }
                        if now_ns() >= give_up_ns {
                            return Ok(None);
                        }
                    }
                })
                .await
                .map_err(|error| format!("redlock task: {error}"))?
            }
            Locker::Pings(conn) => {
                ping(conn).await?;
                Ok(Some(Held::Pings))
            }
            Locker::Raw(conn) => {
                let token = format!("{}:{}", std::process::id(), now_ns());
                let set: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(LEASE.as_millis() as u64)
                    .query_async(&mut conn.clone())
                    .await
                    .map_err(|error| format!("raw SET NX: {error}"))?;
                match set {
                    Some(_) => Ok(Some(Held::Raw {
                        key: key.to_owned(),
                        token,
                    })),
                    None => Err("raw SET NX: key already held".to_owned()),
                }
            }
        }
    }

    /// Releases what [`acquire`](Self::acquire) returned.
    pub async fn release(&self, held: Held) -> Result<(), String> {
        match (self, held) {
            (Locker::Redlatch(_) | Locker::Fair(_), Held::Redlatch(guard)) => guard
                .release()
                .await
                .map_err(|error| format!("redlatch release: {error}")),
            (Locker::Token(_), Held::Token(guard)) => guard
                .release()
                .await
                .map_err(|error| format!("redlatch token release: {error}")),
            (Locker::Quorum(_), Held::Quorum(guard)) => guard
                .release()
                .await
                .map_err(|error| format!("redlatch Redlock release: {error}")),
            (Locker::Rslock(manager), Held::Rslock(lock)) => {
                // Best effort by design: rslock reports no outcome.
                manager.unlock(&lock).await;
                Ok(())
            }
            (Locker::Redlock(manager), Held::Redlock { resource, val }) => {
                let manager = Arc::clone(manager);
                tokio::task::spawn_blocking(move || {
                    let lock = redlock::Lock {
                        resource,
                        val,
                        validity_time: 0,
                        lock_manager: &manager,
                    };
                    manager.unlock(&lock);
                })
                .await
                .map_err(|error| format!("redlock task: {error}"))
            }
            (Locker::Raw(conn), Held::Raw { key, token }) => {
                let deleted: i64 = RAW_RELEASE
                    .key(&key)
                    .arg(&token)
                    .invoke_async(&mut conn.clone())
                    .await
                    .map_err(|error| format!("raw release: {error}"))?;
                match deleted {
                    1 => Ok(()),
                    _ => Err("raw release: token did not match".to_owned()),
                }
            }
            (Locker::Pings(conn), Held::Pings) => ping(conn).await,
            _ => Err("released through another kind of lock".to_owned()),
        }
    }
}

/// One `PING` on `conn`: half a cycle of [`Kind::Pings`].
async fn ping(conn: &MultiplexedConnection) -> Result<(), String> {
    redis::cmd("PING")
        .query_async::<()>(&mut conn.clone())
        .await
        .map_err(|error| format!("PING: {error}"))
}

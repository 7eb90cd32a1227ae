//! The loss watch against a chaos actor (issue 35): clients hold, renew,
//! re-enter and release every primitive the watch covers (locks, fair
//! locks, read and write holds of read-write locks; permits are not
//! watched: their renewals find a lost one) on a real redis-server, while
//! an actor, at random moments, overwrites lock keys with strings, deletes,
//! renames, expires and touches them, flushes, kills the watch's
//! connection, and restarts the server (and the workers force-unlock
//! their own locks now and then); once with the default tracking
//! table, once with one of two keys. It also does what must lose nothing:
//! writes and flushes keys of the same names in another database (whose
//! invalidations reach this one's readers), stops the server (SIGSTOP)
//! longer than the clients' response timeout, and pauses its clients
//! (`CLIENT PAUSE`); and overwrites keys with a list, or with a hash
//! that lacks the holder's field.
//!
//! At the end of every hold, checked against the server: a guard that says
//! lost is not in Redis (with a reason the actor's deeds explain), and a
//! guard whose field is gone from Redis learns it within [`LEARNS_WITHIN`].
//! Over every second, connections accepted and commands processed stay
//! under generous bounds (the storms this hunts opened 700 connections a
//! second, or read 4,000+ keys a second).
//!
//! Seeded: the seed is printed, `REDLATCH_TEST_SEED` replays its choices
//! (the timings are the machine's). Each run lasts
//! `REDLATCH_CHAOS_SECS` seconds (8 by default: both runs fit in CI's
//! minute; set it to 600 for a long run).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlatch::{Client, LostReason};

use crate::common;

/// How long a guard may take to learn its hold is gone from Redis: the
/// slowest re-read (1 s), the longest reconnect delay (2 s), a restart, a
/// loaded machine.
const LEARNS_WITHIN: Duration = Duration::from_secs(8);

/// Most connections the server may accept in a second: the clients' and
/// the test's own reconnections after a kill or a restart.
const MOST_CONNECTIONS_PER_SECOND: f64 = 60.0;

/// Most commands the server may process in a second: the workers pace
/// themselves (a pause between holds), so this is their load, the
/// renewals, the watch's reads and the actor's, with room to spare.
const MOST_COMMANDS_PER_SECOND: f64 = 4_000.0;

/// Most watch reads (HEXISTS) in a second.
const MOST_READS_PER_SECOND: f64 = 600.0;

const WORKERS: u64 = 8;

/// The lock names the workers and the actor share, per primitive.
const LOCKS: u64 = 5;
const FAIR_LOCKS: u64 = 3;
const RW_LOCKS: u64 = 3;

fn names() -> Vec<String> {
    let mut names = Vec::new();
    names.extend((0..LOCKS).map(|index| format!("chaos:lock:{index}")));
    names.extend((0..FAIR_LOCKS).map(|index| format!("chaos:fair:{index}")));
    names.extend((0..RW_LOCKS).map(|index| format!("chaos:rw:{index}")));
    names
}

fn run_for() -> Duration {
    let seconds = std::env::var("REDLATCH_CHAOS_SECS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(8);
    Duration::from_secs(seconds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_reports_a_loss_if_and_only_if_redis_lost_the_hold_whatever_the_chaos() {
    let server = common::server();
    chaos(server, "default tracking table").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_stays_true_and_calm_with_a_tracking_table_of_two_keys() {
    let server = testkit::RedisServer::builder()
        .arg("tracking-table-max-keys", "2")
        .start()
        .expect("start redis-server");
    chaos(server, "tracking-table-max-keys 2").await;
}

/// What the actor and the workers share.
struct Shared {
    url: String,
    /// Server restarts and stalls so far: a hold that lived through one may
    /// also be lost as `NotRenewed` (the server was away longer than its
    /// lease).
    restarts: AtomicU64,
    /// Force-unlocks by the workers so far: a hold that lived through one
    /// on its key may be lost as `ForceUnlocked`.
    force_unlocks: AtomicU64,
    stop: AtomicBool,
    holds: AtomicU64,
    losses: AtomicU64,
}

async fn chaos(server: testkit::RedisServer, variant: &str) {
    let mut rng = common::Rng::from_env();
    let shared = Arc::new(Shared {
        url: server.url(),
        restarts: AtomicU64::new(0),
        force_unlocks: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        holds: AtomicU64::new(0),
        losses: AtomicU64::new(0),
    });
    // One client renews short leases (every second), the other the default.
    // (A 1.5 s lease left a loaded machine, load average 15, too little room:
    // a renewal's answer that came late ended a hold the server still had.)
    let clients = Arc::new([
        common::client_with_lease(&server, Duration::from_secs(3)).await,
        common::client(&server).await,
    ]);
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let seed = rng.below(u64::MAX);
        workers.push(tokio::spawn(worker(clients.clone(), shared.clone(), seed)));
    }
    let actor_seed = rng.below(u64::MAX);
    let (storms, server) = actor(server, shared.clone(), actor_seed).await;
    let mut wrong = Vec::new();
    for worker in workers {
        wrong.extend(worker.await.unwrap());
    }
    drop(server);
    let holds = shared.holds.load(Ordering::Relaxed);
    let losses = shared.losses.load(Ordering::Relaxed);
    eprintln!(
        "{variant}: {holds} holds, {losses} lost, {} restarts",
        shared.restarts.load(Ordering::Relaxed)
    );
    assert!(wrong.is_empty(), "{variant}: {wrong:#?}");
    assert!(storms.is_empty(), "{variant}: {storms:#?}");
    // Not vacuous: holds were taken, and the actor took some.
    assert!(
        holds >= 20 && losses >= 1,
        "{variant}: {holds} holds, {losses} lost"
    );
}

/// A hold of any watched kind, with the key and field the watch reads.
enum Held {
    Lock(redlatch::Guard),
    Read(redlatch::ReadGuard),
    Write(redlatch::WriteGuard),
}

impl Held {
    fn is_held(&self) -> bool {
        match self {
            Held::Lock(guard) => guard.is_held(),
            Held::Read(guard) => guard.is_held(),
            Held::Write(guard) => guard.is_held(),
        }
    }

    fn lost_reason(&self) -> Option<LostReason> {
        match self {
            Held::Lock(guard) => guard.lost_reason(),
            Held::Read(guard) => guard.lost_reason(),
            Held::Write(guard) => guard.lost_reason(),
        }
    }

    fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let lost: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match self {
            Held::Lock(guard) => Box::pin(guard.lost()),
            Held::Read(guard) => Box::pin(guard.lost()),
            Held::Write(guard) => Box::pin(guard.lost()),
        };
        lost
    }

    /// The lock hash and the field of this hold (no key prefix is set).
    fn key_and_field(&self) -> (String, String) {
        match self {
            Held::Lock(guard) => (guard.key().to_owned(), guard.owner().to_owned()),
            Held::Read(guard) => (guard.name().to_owned(), guard.owner().to_owned()),
            Held::Write(guard) => (guard.name().to_owned(), guard.owner().to_owned()),
        }
    }

    async fn reenter(&self) -> Option<Held> {
        match self {
            Held::Lock(guard) => guard.reenter().await.ok().map(Held::Lock),
            Held::Read(guard) => guard.reenter().await.ok().map(Held::Read),
            Held::Write(guard) => guard.reenter().await.ok().map(Held::Write),
        }
    }

    async fn release(self) {
        // A lost hold refuses its release: nothing to check here.
        let _ = match self {
            Held::Lock(guard) => guard.release().await,
            Held::Read(guard) => guard.release().await,
            Held::Write(guard) => guard.release().await,
        };
    }
}

/// Takes a hold of a random kind, lease and name, if free.
async fn take(client: &Client, rng: &mut common::Rng) -> Option<Held> {
    let fixed = (rng.below(3) == 0).then_some(Duration::from_secs(60));
    let taken = match rng.below(4) {
        0 => {
            let lock = client.lock(format!("chaos:lock:{}", rng.below(LOCKS)));
            match fixed {
                Some(lease) => lock.clone().with_lease(lease).try_acquire().await,
                None => lock.try_acquire().await,
            }
            .map(|guard| guard.map(Held::Lock))
        }
        1 => {
            let mut lock = client.fair_lock(format!("chaos:fair:{}", rng.below(FAIR_LOCKS)));
            if let Some(lease) = fixed {
                lock = lock.with_lease(lease);
            }
            lock.try_acquire().await.map(|guard| guard.map(Held::Lock))
        }
        side => {
            let mut lock = client.read_write_lock(format!("chaos:rw:{}", rng.below(RW_LOCKS)));
            if let Some(lease) = fixed {
                lock = lock.with_lease(lease);
            }
            if side == 2 {
                lock.try_read().await.map(|guard| guard.map(Held::Read))
            } else {
                lock.try_write().await.map(|guard| guard.map(Held::Write))
            }
        }
    };
    // Taken by another, a key the actor overwrote, the server restarting.
    taken.ok().flatten()
}

/// Holds, re-enters, checks and releases until told to stop; returns what
/// it found wrong.
async fn worker(clients: Arc<[Client; 2]>, shared: Arc<Shared>, seed: u64) -> Vec<String> {
    let mut rng = common::Rng::new(seed);
    let mut admin = Admin::new(&shared.url);
    let mut wrong = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        let client = &clients[rng.below(2) as usize];
        let Some(held) = take(client, &mut rng).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let began = (
            shared.restarts.load(Ordering::Acquire),
            shared.force_unlocks.load(Ordering::Acquire),
        );
        shared.holds.fetch_add(1, Ordering::Relaxed);
        let again = if rng.below(3) == 0 {
            held.reenter().await
        } else {
            None
        };
        tokio::time::sleep(Duration::from_millis(20 + rng.below(300))).await;
        if let Held::Lock(guard) = &held
            && guard.name().starts_with("chaos:lock:")
            && rng.below(8) == 0
        {
            // Its own hold (a plain lock has one holder): no other hold is
            // taken down with it but one that came after the actor's deed.
            shared.force_unlocks.fetch_add(1, Ordering::AcqRel);
            let _ = client.lock(guard.name()).force_unlock().await;
        }
        if let Err(what) = check(&held, &mut admin, &shared, began).await {
            wrong.push(what);
        }
        if let Some(again) = again {
            again.release().await;
        }
        held.release().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wrong
}

/// A hold is reported lost if and only if Redis no longer has it.
async fn check(
    held: &Held,
    admin: &mut Admin,
    shared: &Shared,
    (restarts, force_unlocks): (u64, u64),
) -> Result<(), String> {
    let (key, field) = held.key_and_field();
    let held_before = held.is_held();
    let in_redis = admin.has(&key, &field).await;
    if held_before && !in_redis {
        let started = Instant::now();
        if tokio::time::timeout(LEARNS_WITHIN, held.lost())
            .await
            .is_err()
        {
            return Err(format!(
                "{key} {field}: gone from Redis, still held {LEARNS_WITHIN:?} later"
            ));
        }
        eprintln!(
            "{key}: gone from Redis, learnt {:?} after the check",
            started.elapsed()
        );
    } else if !held_before && in_redis {
        return Err(format!(
            "{key} {field}: reported lost ({:?}) while Redis has it",
            held.lost_reason()
        ));
    }
    match held.lost_reason() {
        None => Ok(()),
        Some(reason) => {
            shared.losses.fetch_add(1, Ordering::Relaxed);
            let restarted = shared.restarts.load(Ordering::Acquire) != restarts;
            let forced = shared.force_unlocks.load(Ordering::Acquire) != force_unlocks;
            match reason {
                LostReason::Gone => Ok(()),
                LostReason::NotRenewed if restarted => Ok(()),
                LostReason::ForceUnlocked if forced => Ok(()),
                other => Err(format!(
                    "{key} {field}: lost as {other:?} (restarted: {restarted}, force-unlocked: {forced})"
                )),
            }
        }
    }
}

/// A connection of the test's own, opened again after a restart.
struct Admin {
    client: redis::Client,
    conn: Option<redis::aio::MultiplexedConnection>,
}

impl Admin {
    fn new(url: &str) -> Admin {
        Admin {
            client: redis::Client::open(url).unwrap(),
            conn: None,
        }
    }

    /// Runs `cmd` until the server answers (it may be restarting).
    async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        for _ in 0..200 {
            if self.conn.is_none() {
                self.conn = self.client.get_multiplexed_async_connection().await.ok();
            }
            if let Some(conn) = self.conn.as_mut() {
                match cmd.query_async(conn).await {
                    Ok(value) => return Ok(value),
                    // The server's answer (WRONGTYPE, no such key): the caller's.
                    Err(error) if error.code().is_some() => return Err(error),
                    Err(_) => self.conn = None,
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the test server did not come back within 10 s");
    }

    /// Whether `key` is a lock hash with `field` in it.
    async fn has(&mut self, key: &str, field: &str) -> bool {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(
            "if redis.call('type', KEYS[1]).ok == 'hash' then \
             return redis.call('hexists', KEYS[1], ARGV[1]) else return 0 end",
        )
        .arg(1)
        .arg(key)
        .arg(field);
        self.query::<i64>(&cmd).await.unwrap() == 1
    }

    /// The ids of the connections with client tracking on: the watches.
    async fn watch_connections(&mut self) -> Vec<String> {
        let list: String = self
            .query(redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("normal"))
            .await
            .unwrap();
        list.lines()
            .filter(|line| {
                line.split(' ').any(|word| {
                    word.strip_prefix("flags=")
                        .is_some_and(|flags| flags.contains('t'))
                })
            })
            .filter_map(|line| line.split(' ').find_map(|word| word.strip_prefix("id=")))
            .map(str::to_owned)
            .collect()
    }

    /// The server's counters: connections accepted, commands processed,
    /// HEXISTS calls.
    async fn counters(&mut self) -> [u64; 3] {
        let info: String = self
            .query(redis::cmd("INFO").arg("stats").arg("commandstats"))
            .await
            .unwrap();
        let counter = |name: &str| -> u64 {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map_or(0, |value| {
                    let value = value.strip_prefix("calls=").unwrap_or(value);
                    let end = value.find(',').unwrap_or(value.len());
                    value[..end].trim().parse().unwrap_or(0)
                })
        };
        [
            counter("total_connections_received"),
            counter("total_commands_processed"),
            counter("cmdstat_hexists"),
        ]
    }
}

/// Does harm at random moments for the run's length, then tells the
/// workers to stop; returns every second whose load broke a bound, and
/// the server (the workers' last checks still need it).
async fn actor(
    mut server: testkit::RedisServer,
    shared: Arc<Shared>,
    seed: u64,
) -> (Vec<String>, testkit::RedisServer) {
    let mut rng = common::Rng::new(seed);
    let names = names();
    let mut admin = Admin::new(&shared.url);
    // The same names in another database.
    let mut elsewhere = Admin::new(&format!("{}/5", shared.url));
    let mut storms = Vec::new();
    let mut renamed = 0u64;
    let mut last_restart = Instant::now();
    let end = Instant::now() + run_for();
    let mut window = (Instant::now(), admin.counters().await);
    // The busiest second seen, per counter.
    let mut busiest = [0f64; 3];
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(30 + rng.below(200))).await;
        let name = &names[rng.below(names.len() as u64) as usize];
        let mut restarted = false;
        let deed = rng.below(100);
        let cmd = match deed {
            0..15 => Some(
                redis::cmd("SET")
                    .arg(name)
                    .arg("x")
                    .arg("PX")
                    .arg(1_000)
                    .clone(),
            ),
            15..33 => Some(redis::cmd("DEL").arg(name).clone()),
            // Renamed away for good: the hold's field never comes back to its key.
            33..43 => {
                renamed += 1;
                Some(
                    redis::cmd("RENAME")
                        .arg(name)
                        .arg(format!("chaos:renamed:{renamed}"))
                        .clone(),
                )
            }
            43..58 => Some(redis::cmd("PEXPIRE").arg(name).arg(1).clone()),
            // Changes the key, loses nothing: nothing may be reported lost.
            58..73 => Some(redis::cmd("EXPIRE").arg(name).arg(120).clone()),
            73..76 => Some(redis::cmd("FLUSHALL").clone()),
            76..90 => {
                for id in admin.watch_connections().await {
                    let _: redis::RedisResult<redis::Value> = admin
                        .query(redis::cmd("CLIENT").arg("KILL").arg("ID").arg(&id))
                        .await;
                }
                None
            }
            // The same name in database 5: tracking is by name, so the
            // watch hears of it; nothing here is lost.
            93..96 => {
                let deed = match rng.below(3) {
                    0 => redis::cmd("SET").arg(name).arg("x").clone(),
                    1 => redis::cmd("DEL").arg(name).clone(),
                    _ => redis::cmd("FLUSHDB").clone(),
                };
                let _: redis::RedisResult<redis::Value> = elsewhere.query(&deed).await;
                None
            }
            // Longer than the clients' 500 ms response timeout.
            96 if last_restart.elapsed() > Duration::from_secs(3) => {
                shared.restarts.fetch_add(1, Ordering::AcqRel);
                server.pause().expect("SIGSTOP");
                tokio::time::sleep(Duration::from_millis(600 + rng.below(300))).await;
                server.resume().expect("SIGCONT");
                last_restart = Instant::now();
                None
            }
            97 => Some(
                redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(300)
                    .arg("ALL")
                    .clone(),
            ),
            // Another type, or a hash without the holder's field.
            98 => {
                let _: redis::RedisResult<redis::Value> =
                    admin.query(redis::cmd("DEL").arg(name)).await;
                Some(redis::cmd("LPUSH").arg(name).arg("x").clone())
            }
            99 => {
                let _: redis::RedisResult<redis::Value> =
                    admin.query(redis::cmd("DEL").arg(name)).await;
                Some(
                    redis::cmd("HSET")
                        .arg(name)
                        .arg("not-a-holder")
                        .arg(1)
                        .clone(),
                )
            }
            90..93 if last_restart.elapsed() > Duration::from_secs(3) => {
                tokio::task::block_in_place(|| server.restart()).expect("restart the server");
                shared.restarts.fetch_add(1, Ordering::AcqRel);
                last_restart = Instant::now();
                restarted = true;
                None
            }
            _ => None,
        };
        if let Some(cmd) = cmd {
            // RENAME of a missing key, a string where a hash was: the server says no.
            let _: redis::RedisResult<redis::Value> = admin.query(&cmd).await;
        }
        if restarted {
            // The counters started again with the server.
            window = (Instant::now(), admin.counters().await);
            continue;
        }
        let elapsed = window.0.elapsed();
        if elapsed >= Duration::from_secs(1) {
            let now = admin.counters().await;
            let rate = |index: usize| {
                now[index].saturating_sub(window.1[index]) as f64 / elapsed.as_secs_f64()
            };
            let (connections, commands, reads) = (rate(0), rate(1), rate(2));
            for (most, rate) in busiest.iter_mut().zip([connections, commands, reads]) {
                *most = most.max(rate);
            }
            if connections > MOST_CONNECTIONS_PER_SECOND
                || commands > MOST_COMMANDS_PER_SECOND
                || reads > MOST_READS_PER_SECOND
            {
                storms.push(format!(
                    "{connections:.0} connections/s, {commands:.0} commands/s, {reads:.0} HEXISTS/s"
                ));
            }
            window = (Instant::now(), now);
        }
    }
    eprintln!(
        "busiest second: {:.0} connections/s, {:.0} commands/s, {:.0} HEXISTS/s",
        busiest[0], busiest[1], busiest[2]
    );
    // Quiet from now on: every worker's last hold is checked against a
    // server at rest.
    shared.stop.store(true, Ordering::Release);
    (storms, server)
}

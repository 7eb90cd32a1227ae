//! Redlock over independent masters: acquire and release, re-entry,
//! wake-ups, the Redisson layout on every node, and bad input.

mod common;
mod redlock_common;

use std::time::{Duration, Instant};

use redis::Script;
use redlatch::{Error, Redlock};
use redlock_common::{admin, eventually, hold_count, masters, redlock, slow_proxies};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_acquire_and_release_on_every_node() {
    let masters = masters(5);
    let redlock = redlock(&masters, LEASE).await;
    let lock = redlock.lock("rl:basic");

    let guard = lock.acquire().await.expect("acquire");
    assert!(guard.is_held());
    let owner = guard.owner().to_owned();
    let on_every_node = eventually(Duration::from_secs(5), || async {
        let mut all = true;
        for server in &masters {
            all &= hold_count(server, "rl:basic", &owner).await == 1;
        }
        all
    })
    .await;
    assert!(on_every_node, "held on every node");
    let status = lock.status().await.expect("status");
    assert_eq!(status.answered(), 5);
    assert_eq!(status.majority_holder(), Some(guard.owner()));
    assert!(
        lock.try_acquire().await.expect("try").is_none(),
        "held on a majority"
    );

    let first = guard.token();
    guard.release().await.expect("release");
    let released_everywhere = eventually(Duration::from_secs(5), || async {
        let mut none = true;
        for server in &masters {
            none &= hold_count(server, "rl:basic", &owner).await == 0;
        }
        none
    })
    .await;
    assert!(released_everywhere, "released on every node");
    let again = lock.try_acquire().await.expect("try").expect("free again");
    assert!(again.token() > first);
    again.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentered_guard_keeps_the_lock_until_its_last_hold_goes() {
    let masters = masters(3);
    let redlock = redlock(&masters, LEASE).await;
    let lock = redlock.lock("rl:reenter");
    let outer = lock.acquire().await.expect("acquire");
    let inner = outer.reenter().await.expect("reenter");
    assert_eq!(inner.token(), outer.token());
    // A majority carries both holds (a slow node's first grant may come after
    // the re-entry reached it).
    let mut doubled = 0;
    for server in &masters {
        doubled += usize::from(hold_count(server, "rl:reenter", outer.owner()).await == 2);
    }
    assert!(doubled >= 2, "hold count 2 on {doubled} of 3 nodes");
    inner.release().await.expect("release inner");
    assert!(lock.try_acquire().await.expect("try").is_none());
    assert!(outer.is_held());
    outer.release().await.expect("release outer");
    assert!(lock.try_acquire().await.expect("try").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_on_unlock_message_long_before_the_lease_ends() {
    let masters = masters(5);
    let holder = redlock(&masters, LEASE).await;
    let waiter = redlock(&masters, LEASE).await;
    let guard = holder.lock("rl:wake").acquire().await.expect("acquire");
    let release_after = Duration::from_millis(300);
    let releasing = tokio::spawn(async move {
        tokio::time::sleep(release_after).await;
        guard.release().await.expect("release");
    });
    let started = Instant::now();
    // The holder's lease is 30 s: only an unlock message can wake the waiter this early.
    let taken = waiter
        .lock("rl:wake")
        .acquire_within(Some(Duration::from_secs(10)))
        .await
        .expect("woken by the unlock message");
    let waited = started.elapsed();
    assert!(waited >= release_after - Duration::from_millis(50));
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    releasing.await.unwrap();
    taken.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_lease_runs_out_and_lost_resolves() {
    let masters = masters(3);
    let redlock = redlock(&masters, LEASE).await;
    let lock = redlock.lock("rl:fixed");
    let guard = lock
        .clone()
        .with_lease(Duration::from_millis(300))
        .acquire()
        .await
        .expect("acquire");
    assert!(!guard.is_renewed());
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost within the lease");
    assert!(!guard.is_held());
    let next = lock
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .expect("free once the lease ran out");
    assert!(next.token() > guard.token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_short_lease_alive_on_every_node() {
    let masters = masters(3);
    let redlock = redlock(&masters, Duration::from_millis(300)).await;
    let lock = redlock.lock("rl:renewed");
    let guard = lock.acquire().await.expect("acquire");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(guard.is_held(), "renewed: {:?}", guard.lost_reason());
    assert!(lock.try_acquire().await.expect("try").is_none());
    guard.release().await.expect("release");
}

/// Redisson's RLock acquire, as seed 003 gives it (what a `RedissonRedLock`
/// runs on each of its masters).
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

const JAVA_OWNER: &str = "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:57";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_redlock_on_a_majority_excludes_redlatch_and_its_unlock_wakes_it() {
    let masters = masters(5);
    let redlock = redlock(&masters, LEASE).await;
    // A Redisson RedLock that got 3 of the 5 masters.
    for server in masters.iter().take(3) {
        let got: Option<i64> = Script::new(REDISSON_LOCK)
            .key("rl:shared")
            .arg(30_000)
            .arg(JAVA_OWNER)
            .invoke_async(&mut admin(server).await)
            .await
            .unwrap();
        assert_eq!(got, None, "Redisson took the master");
    }
    let lock = redlock.lock("rl:shared");
    assert!(lock.try_acquire().await.expect("try").is_none());

    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let guard = lock
            .acquire_within(Some(Duration::from_secs(10)))
            .await
            .expect("acquired after Redisson's unlock");
        (started.elapsed(), guard)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for server in masters.iter().take(3) {
        let _: Option<i64> = Script::new(REDISSON_UNLOCK)
            .key("rl:shared")
            .key("redisson_lock__channel:{rl:shared}")
            .arg(0)
            .arg(30_000)
            .arg(JAVA_OWNER)
            .invoke_async(&mut admin(server).await)
            .await
            .unwrap();
    }
    let (waited, guard) = waiting.await.unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "woken by Redisson's unlock messages, not the 30 s lease: {waited:?}"
    );
    // And the other way round: Redisson sees redlatch's hold as taken (its PTTL).
    let pttl: Option<i64> = Script::new(REDISSON_LOCK)
        .key("rl:shared")
        .arg(30_000)
        .arg(JAVA_OWNER)
        .invoke_async(&mut admin(&masters[0]).await)
        .await
        .unwrap();
    assert!(pttl.is_some_and(|pttl| pttl > 0));
    guard.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gives_typed_errors() {
    let empty: [&str; 0] = [];
    assert!(matches!(
        Redlock::connect(&empty).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Redlock::connect(&["not a url"]).await,
        Err(Error::InvalidConfig(_))
    ));
    let masters = masters(3);
    let redlock = redlock(&masters, LEASE).await;
    assert!(matches!(
        redlock.clone().with_node_timeout(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    assert!(matches!(
        redlock.lock("").try_acquire().await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        redlock
            .lock("rl:bad")
            .with_lease(Duration::ZERO)
            .try_acquire()
            .await,
        Err(Error::InvalidDuration { .. })
    ));
    // A key of another type on a majority of the nodes: WRONGTYPE, left alone.
    // (On a minority it is a failed node like any other.)
    for server in masters.iter().skip(1) {
        let _: () = redis::cmd("SET")
            .arg("rl:string")
            .arg("x")
            .query_async(&mut admin(server).await)
            .await
            .unwrap();
    }
    assert!(matches!(
        redlock.lock("rl:string").try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    let kept: String = redis::cmd("GET")
        .arg("rl:string")
        .query_async(&mut admin(&masters[1]).await)
        .await
        .unwrap();
    assert_eq!(kept, "x");
}

/// Two of five masters answer 100 ms late each way: the guard is handed
/// out on the three fast ones and released before the slow ones' grants
/// come back. Their grants are late, not lost: the guard's release follows
/// each grant on the node's connection and deletes it, so nothing is given
/// back on top (before: a third script call per slow node, a release that
/// found nothing and published).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_grant_the_guards_release_deleted_is_not_given_back_again() {
    let masters = masters(5);
    let proxies = slow_proxies(&masters, &[3, 4], Duration::from_millis(100));
    let urls: Vec<String> = (0..3)
        .map(|i| masters[i].url())
        .chain(proxies.iter().map(testkit::Proxy::url))
        .collect();
    let mut clients = Vec::new();
    for url in urls {
        let client = redlatch::Client::builder(&url)
            .response_timeout(Duration::from_secs(5))
            .connect()
            .await
            .unwrap();
        clients.push((url, client));
    }
    let redlock = Redlock::with_labels(clients).unwrap();
    let lock = redlock.lock("rl:late");
    // A first cycle loads the scripts everywhere: no call is sent twice below.
    lock.acquire()
        .await
        .unwrap()
        .release_everywhere()
        .await
        .unwrap();
    for server in [&masters[3], &masters[4]] {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut admin(server).await)
            .await
            .unwrap();
    }

    let guard = lock.acquire().await.unwrap();
    let owner = guard.owner().to_owned();
    guard.release_everywhere().await.unwrap();
    let gone = eventually(Duration::from_secs(5), || async {
        let mut none = true;
        for server in &masters {
            none &= hold_count(server, "rl:late", &owner).await == 0;
        }
        none
    })
    .await;
    assert!(gone, "a hold left on some node");
    // A give-back would follow the late grant within a round trip (200 ms).
    tokio::time::sleep(Duration::from_millis(600)).await;
    for (n, server) in [&masters[3], &masters[4]].into_iter().enumerate() {
        assert_eq!(
            common::script_calls(&mut admin(server).await).await,
            2,
            "slow node {n}: one acquire and one release, no give-back"
        );
    }
}

/// The rest of a Redlock call that a slow node had not answered when a
/// majority decided runs on the clients' runtime (the first client's
/// background spawner, where every clean-up of the client runs), not on
/// the caller's (before: `tokio::spawn` on whatever runtime called): the
/// client counts it among its background tasks, and a caller's runtime
/// that ends at once cuts nothing off.
#[test]
fn the_calls_a_majority_did_not_wait_for_run_on_the_clients_runtime() {
    let masters = masters(3);
    let proxy = testkit::Proxy::start(masters[2].addr()).unwrap();
    let clients_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let redlock = clients_runtime.block_on(async {
        let mut clients = Vec::new();
        for url in [masters[0].url(), masters[1].url(), proxy.url()] {
            let client = redlatch::Client::builder(&url)
                .response_timeout(Duration::from_secs(5))
                .default_lease(LEASE)
                .connect()
                .await
                .unwrap();
            clients.push(client);
        }
        Redlock::new(clients).unwrap()
    });
    // Slow from now on: a majority answers long before the third node.
    proxy.set_both(testkit::LinkFaults {
        latency: Duration::from_millis(500),
        ..testkit::LinkFaults::default()
    });
    let first = redlock.clients()[0].clone();
    assert_eq!(first.background_tasks(), 0);

    let caller = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lock = redlock.lock("rl:runtime");
    let guard = caller.block_on(lock.acquire()).unwrap();
    assert!(
        first.background_tasks() >= 1,
        "the slow node's call is a background task of the clients' runtime"
    );
    drop(caller);

    let owner = guard.owner().to_owned();
    clients_runtime.block_on(async {
        // The late grant lands (the call went on after its caller's
        // runtime ended) and is the guard's: its release reaches it.
        assert!(
            eventually(Duration::from_secs(10), || async {
                hold_count(&masters[2], "rl:runtime", &owner).await == 1
            })
            .await,
            "the slow node's grant never landed"
        );
        assert!(
            eventually(Duration::from_secs(10), || async {
                first.background_tasks() == 0
            })
            .await
        );
        guard.release_everywhere().await.unwrap();
        for server in &masters {
            assert_eq!(hold_count(server, "rl:runtime", &owner).await, 0);
        }
    });
}

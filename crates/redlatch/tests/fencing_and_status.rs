//! Fencing tokens, status snapshots and force-unlock.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;
#[cfg(feature = "holder-records")]
#[path = "fencing_and_status/holder_records.rs"]
mod holder_records;

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::test]
async fn tokens_strictly_increase_across_clients() {
    let server = common::server();
    let a = common::client(&server).await;
    let b = common::client(&server).await;
    let mut last = 0;
    for round in 0..20 {
        let client = if round % 2 == 0 { &a } else { &b };
        let guard = client.lock("fenced").acquire().await.unwrap();
        assert!(
            guard.token() > last,
            "token {} after {}",
            guard.token(),
            last
        );
        last = guard.token();
        guard.release().await.unwrap();
    }
    let mut admin = common::admin(&server).await;
    let counter: u64 = admin.get("redlatch_lock_token").await.unwrap();
    assert_eq!(counter, last);
}

#[tokio::test]
async fn status_reports_holders_counts_ttl_and_token() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_secs(10)).await;
    let lock = client.lock("inspected");

    let free = lock.status().await.unwrap();
    assert!(!free.held);
    assert!(free.holders.is_empty());
    assert_eq!(free.ttl, None);
    assert_eq!(free.last_token, None);

    let guard = lock.acquire().await.unwrap();
    let again = guard.reenter().await.unwrap();
    let held = lock.status().await.unwrap();
    assert!(held.held);
    assert_eq!(held.holders.len(), 1);
    assert_eq!(held.holders[0].owner, guard.owner());
    assert_eq!(held.holders[0].count, 2);
    let ttl = held.ttl.expect("a lease");
    assert!(
        ttl > Duration::from_secs(8) && ttl <= Duration::from_secs(10),
        "{ttl:?}"
    );
    assert_eq!(held.last_token, Some(guard.token()));
    drop(again);
    drop(guard);
}

#[tokio::test]
async fn force_unlock_frees_the_lock_wakes_waiters_and_marks_guard_lost() {
    let server = common::server();
    let holder = common::client(&server).await;
    let other = common::client(&server).await;
    let guard = holder.lock("stuck").acquire().await.unwrap();
    let waiter = tokio::spawn({
        let lock = other.lock("stuck");
        async move { lock.acquire().await.map(|guard| guard.token()) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());

    assert!(holder.lock("stuck").force_unlock().await.unwrap());
    let token = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("waiter woken by force-unlock")
        .unwrap()
        .unwrap();
    assert!(token > guard.token());
    assert!(!guard.is_held(), "the forced-out guard must know");
    assert_eq!(
        guard.lost_reason(),
        Some(redlatch::LostReason::ForceUnlocked)
    );
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("lost() resolves after force-unlock");
    assert!(matches!(
        guard.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
    assert!(!other.lock("nothing-here").force_unlock().await.unwrap());
}

#[tokio::test]
async fn key_prefix_applies_to_key_channel_and_counter() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .key_prefix("shop:")
        .connect()
        .await
        .unwrap();
    let mut admin = common::admin(&server).await;
    let guard = client.lock("order").acquire().await.unwrap();
    assert_eq!(guard.key(), "shop:order");
    let exists: bool = admin.exists("shop:order").await.unwrap();
    assert!(exists);
    let counter: u64 = admin.get("redlatch_lock_token").await.unwrap();
    assert_eq!(counter, guard.token());
    let own: Option<u64> = admin.get("redisson_lock_token:{shop:order}").await.unwrap();
    assert_eq!(own, None, "no counter per name");
}

/// Keys left without an expiry on `admin`'s server (holder records, which
/// expire, excluded by their TTL).
async fn keys_without_expiry(admin: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let keys: Vec<String> = admin.keys("*").await.unwrap();
    let mut lasting = Vec::new();
    for key in keys {
        let ttl: i64 = admin.ttl(&key).await.unwrap();
        if ttl == -1 {
            lasting.push(key);
        }
    }
    lasting.sort();
    lasting
}

/// Issue 36: a thousand names, each locked once (plain, fair, read and
/// write), leave one key without an expiry: the shared fencing counter.
/// Tokens still grow per name and from one name to the next. Failed
/// before: one `redisson_lock_token:{NAME}` per name, 1,000 keys.
#[tokio::test]
async fn a_thousand_names_used_once_leave_one_key_without_an_expiry() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut last = 0;
    for i in 0..1000 {
        let name = format!("user:{i}");
        let token = match i % 10 {
            0 => {
                let guard = client.fair_lock(name.as_str()).acquire().await.unwrap();
                let token = guard.token();
                guard.release().await.unwrap();
                token
            }
            1 => {
                let guard = client.read_write_lock(name.as_str()).write().await.unwrap();
                let token = guard.token();
                guard.release().await.unwrap();
                token
            }
            2 => {
                let guard = client.read_write_lock(name.as_str()).read().await.unwrap();
                let token = guard.token();
                guard.release().await.unwrap();
                token
            }
            _ => {
                let guard = client.lock(name.as_str()).acquire().await.unwrap();
                let token = guard.token();
                guard.release().await.unwrap();
                token
            }
        };
        assert!(token > last, "{name}: token {token} after {last}");
        last = token;
    }
    assert_eq!(
        keys_without_expiry(&mut admin).await,
        vec!["redlatch_lock_token".to_owned()]
    );
}

/// Tokens of one name keep growing across a restart that kept the data, a
/// restart that lost it (the counter starts again from the server's time in
/// microseconds), a counter deleted by hand, and an upgrade from per-name
/// counters (their values are counts, far below the time). Failed before:
/// the token after the restart without data was 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grow_per_name_across_restarts_a_lost_counter_and_an_upgrade() {
    let mut server = testkit::RedisServer::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start()
        .unwrap();
    let mut admin = common::admin(&server).await;
    // An older redlatch (or Redisson's RFencedLock) counted this name to 500.
    let _: () = admin
        .set("redisson_lock_token:{upgraded}", 500)
        .await
        .unwrap();
    let client = common::client(&server).await;
    let token_of = |name: &'static str| {
        let client = client.clone();
        async move {
            // Connection errors while the server restarts: ask again.
            for _ in 0..100 {
                match client.lock(name).acquire().await {
                    Ok(guard) => {
                        let token = guard.token();
                        guard.release().await.unwrap();
                        return token;
                    }
                    Err(error) if error.is_transient() => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(other) => panic!("{other}"),
                }
            }
            panic!("no acquire went through")
        }
    };
    let upgraded = token_of("upgraded").await;
    assert!(upgraded > 500, "{upgraded}");
    let mut last = token_of("fenced").await;
    assert!(last > upgraded);

    server.restart_keeping_data().unwrap();
    let kept = token_of("fenced").await;
    assert!(
        kept > last,
        "after a restart with data: {kept} after {last}"
    );
    last = kept;

    server.restart().unwrap();
    let lost = token_of("fenced").await;
    assert!(
        lost > last,
        "after a restart without data: {lost} after {last}"
    );
    last = lost;

    let mut admin = common::admin(&server).await;
    let _: () = admin.del("redlatch_lock_token").await.unwrap();
    let deleted = token_of("fenced").await;
    assert!(
        deleted > last,
        "after the counter was deleted: {deleted} after {last}"
    );
}

/// A named owner's acquire that re-enters gets the token of the hold it
/// re-entered, though other locks took tokens from the shared counter
/// meanwhile, and its first guard stays held.
#[tokio::test]
async fn a_reentry_keeps_its_holds_token_while_other_locks_take_tokens() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("kept").with_owner("job-1");
    let first = lock.acquire().await.unwrap();
    let other = client.lock("elsewhere").acquire().await.unwrap();
    assert!(other.token() > first.token());
    let second = lock.acquire().await.unwrap();
    assert_eq!(second.token(), first.token());
    assert!(first.is_held() && second.is_held());
    assert_eq!(lock.status().await.unwrap().last_token, Some(first.token()));
    let fair = client.fair_lock("kept-fair").with_owner("job-1");
    let outer = fair.acquire().await.unwrap();
    drop(client.lock("elsewhere-2").acquire().await.unwrap());
    let inner = fair.acquire().await.unwrap();
    assert_eq!(inner.token(), outer.token());
    assert!(outer.is_held());
    drop((first, second, other, outer, inner));
}

/// The same for a read-write lock's named owner: its write and its read
/// re-entries keep their hold's token while other locks take tokens, and
/// its first guards stay held.
#[tokio::test]
async fn a_read_write_reentry_keeps_its_holds_token_while_other_locks_take_tokens() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.read_write_lock("kept-rw").with_owner("job-1");
    let write = lock.write().await.unwrap();
    drop(client.lock("elsewhere").acquire().await.unwrap());
    let again = lock.write().await.unwrap();
    assert_eq!(again.token(), write.token());
    assert!(write.is_held());
    drop((write, again));
    let read = client
        .read_write_lock("kept-rw-read")
        .with_owner("job-2")
        .read()
        .await
        .unwrap();
    let other = client
        .read_write_lock("kept-rw-read")
        .with_owner("job-3")
        .read()
        .await
        .unwrap();
    assert!(other.token() > read.token());
    let reread = client
        .read_write_lock("kept-rw-read")
        .with_owner("job-2")
        .read()
        .await
        .unwrap();
    assert_eq!(reread.token(), read.token());
    assert!(read.is_held() && reread.is_held());
    drop((read, other, reread));
}

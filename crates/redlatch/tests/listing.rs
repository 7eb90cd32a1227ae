//! Finding locks with SCAN, and who waits on them.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::test]
async fn locks_lists_held_locks_under_a_prefix_and_skips_other_hashes() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let a = client.lock("job:a").acquire().await.unwrap();
    let b = client.lock("job:b").acquire().await.unwrap();
    let b2 = b.reenter().await.unwrap();
    let _other = client.lock("cron:x").acquire().await.unwrap();
    let () = admin
        .hset("job:not-a-lock", "field", "value")
        .await
        .unwrap();
    let () = admin.set("job:string", "x").await.unwrap();

    let jobs = client.locks("job:").await.unwrap();
    let names: Vec<&str> = jobs.iter().map(|status| status.name.as_str()).collect();
    assert_eq!(names, ["job:a", "job:b"]);
    assert_eq!(jobs[0].holders[0].owner, a.owner());
    assert_eq!(jobs[1].holders[0].count, 2);
    assert_eq!(jobs[1].last_token, Some(b.token()));
    assert_eq!(client.locks("").await.unwrap().len(), 3);

    drop(b2);
    drop(b);
    let gone = common::eventually(Duration::from_secs(2), || {
        let client = client.clone();
        async move { client.locks("job:").await.unwrap().len() == 1 }
    })
    .await;
    assert!(gone, "a released lock is still listed");
}

#[tokio::test]
async fn locks_lists_token_locks_and_string_locks_but_not_counters() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let token = client.token_lock("job:token").acquire().await.unwrap();
    let _plain = client.lock("job:plain").acquire().await.unwrap();
    // Another library's `SET key token NX PX lease`.
    let () = admin
        .pset_ex("job:seeded", "f3a9c2d1", 10_000)
        .await
        .unwrap();
    // Numbers (a counter, a latch's count) are no locks, lease or not.
    let () = admin.set("job:count", 3).await.unwrap();
    let () = admin.pset_ex("job:leased-count", 4, 10_000).await.unwrap();

    let jobs = client.locks("job:").await.unwrap();
    let names: Vec<&str> = jobs.iter().map(|status| status.name.as_str()).collect();
    assert_eq!(names, ["job:plain", "job:seeded", "job:token"]);
    let listed = &jobs[2];
    assert!(listed.held);
    assert_eq!(listed.holders.len(), 1);
    assert_eq!(listed.holders[0].owner, token.owner_token());
    assert_eq!(listed.holders[0].count, 1);
    assert!(listed.ttl.is_some_and(|ttl| ttl > Duration::ZERO));
    assert_eq!(jobs[1].holders[0].owner, "f3a9c2d1");

    token.release().await.unwrap();
    let jobs = client.locks("job:").await.unwrap();
    assert_eq!(jobs.len(), 2, "a released token lock is still listed");
}

#[tokio::test]
async fn locks_respects_the_key_prefix_and_glob_characters() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .key_prefix("app[1]:")
        .connect()
        .await
        .unwrap();
    let plain = common::client(&server).await;
    let _mine = client.lock("*star").acquire().await.unwrap();
    let _theirs = plain.lock("app1:*star").acquire().await.unwrap();
    let found = client.locks("*").await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "*star");
    assert_eq!(found[0].key, "app[1]:*star");
}

#[tokio::test]
async fn status_counts_clients_with_waiters() {
    let server = common::server();
    let holder = common::client(&server).await;
    let first = common::client(&server).await;
    let second = common::client(&server).await;
    let _guard = holder.lock("crowded").acquire().await.unwrap();
    let mut waiters = Vec::new();
    for client in [&first, &first, &second] {
        let lock = client.lock("crowded");
        waiters.push(tokio::spawn(
            async move { lock.acquire().await.map(|_| ()) },
        ));
    }
    let counted = common::eventually(Duration::from_secs(2), || {
        let lock = holder.lock("crowded");
        async move { lock.status().await.unwrap().waiting_clients == 2 }
    })
    .await;
    assert!(
        counted,
        "two clients have waiters: {:?}",
        holder.lock("crowded").status().await
    );
    for waiter in waiters {
        waiter.abort();
    }
}

/// Keys that change type, value and lease while `locks` walks them (a
/// string, a hash of junk, a list, a lock hash, gone): the walk never
/// fails, and lists only what it read as a lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_survives_keys_changing_type_during_the_walk() {
    let server = common::server();
    let client = common::client(&server).await;
    let admin = common::admin(&server).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        let mut admin = admin.clone();
        tokio::spawn(async move {
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                round += 1;
                for i in 0..20 {
                    let key = format!("flip:{i}");
                    let _: () = admin.del(&key).await.unwrap();
                    match (round + i) % 5 {
                        0 => admin.pset_ex(&key, "token", 10_000).await.unwrap(),
                        1 => admin.hset(&key, "junk", "not a count").await.unwrap(),
                        2 => admin.rpush(&key, "x").await.unwrap(),
                        3 => admin
                            .hset(&key, "3f0e6c1a-8a52-4cf1-9e0b-4c1b9d7a2e11:1", 1)
                            .await
                            .unwrap(),
                        _ => admin.set(&key, "").await.unwrap(),
                    }
                }
            }
        })
    };
    for _ in 0..100 {
        let listed = client.locks("flip:").await.expect("a walk during changes");
        for status in listed {
            assert!(status.held, "{status:?}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.await.unwrap();
}

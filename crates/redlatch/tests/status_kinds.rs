//! Status and listing of every kind of lock: plain, fair (with its waiting
//! line) and read-write (with its mode).

mod common;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Error, LockMode, LockStatus};

/// Asks `status` every 10 ms until `ready` accepts it (at most 10 s).
async fn until<F>(what: &str, mut status: impl AsyncFnMut() -> LockStatus, ready: F) -> LockStatus
where
    F: Fn(&LockStatus) -> bool,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = status().await;
        if ready(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn read_write_lock_status_reports_mode_holders_and_waiters() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let lock = client.read_write_lock("doc:1");

    let free = lock.status().await.unwrap();
    assert!(!free.held);
    assert_eq!(free.mode, None);

    let a = lock.clone().with_owner("a").read().await.unwrap();
    let b = lock.clone().with_owner("b").read().await.unwrap();
    let b2 = b.reenter().await.unwrap();
    let status = lock.status().await.unwrap();
    assert!(status.held);
    assert_eq!(status.mode, Some(LockMode::Read));
    let mut counts: Vec<(String, u64)> = status
        .holders
        .iter()
        .map(|holder| (holder.owner.clone(), holder.count))
        .collect();
    counts.sort();
    let mut expected = vec![(a.owner().to_owned(), 1), (b.owner().to_owned(), 2)];
    expected.sort();
    assert_eq!(
        counts, expected,
        "readers and their hold counts, `mode` left out"
    );
    assert!(status.ttl.is_some());
    // The plain lock API reads the same hash without WrongType (the TTL
    // ticks between the two reads, so it is compared apart).
    let mut plain = client.lock("doc:1").status().await.unwrap();
    assert!(plain.ttl.is_some() && plain.ttl <= status.ttl);
    plain.ttl = status.ttl;
    assert_eq!(plain, status);
    for guard in [b2, b, a] {
        guard.release().await.unwrap();
    }

    let write = lock.clone().with_owner("w").write().await.unwrap();
    let write2 = write.reenter().await.unwrap();
    let status = lock.status().await.unwrap();
    assert_eq!(status.mode, Some(LockMode::Write));
    assert_eq!(status.holders.len(), 1);
    assert!(status.holders[0].owner.ends_with(":w:write"));
    assert_eq!(status.holders[0].count, 2);
    assert_eq!(status.last_token, Some(write.token()));

    // A reader of another client waits on the read-write channel.
    let reader = {
        let lock = other.read_write_lock("doc:1");
        tokio::spawn(async move { lock.read_within(Some(Duration::from_secs(15))).await })
    };
    until(
        "the reader waits",
        async || lock.status().await.unwrap(),
        |status| status.waiting_clients == 1,
    )
    .await;
    write2.release().await.unwrap();
    write.release().await.unwrap();
    let read = reader.await.unwrap().expect("the reader gets the lock");
    assert_eq!(lock.status().await.unwrap().mode, Some(LockMode::Read));
    read.release().await.unwrap();
    assert_eq!(lock.status().await.unwrap().mode, None);
}

#[tokio::test]
async fn fair_lock_status_shows_the_waiting_line_in_order() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.fair_lock("queue:1");
    let guard = lock.clone().with_owner("holder").acquire().await.unwrap();

    let wait = |owner: &str| {
        let lock = lock.clone().with_owner(owner);
        tokio::spawn(async move { lock.acquire_within(Some(Duration::from_secs(15))).await })
    };
    let first = wait("first");
    until(
        "the first waiter is in line",
        async || lock.status().await.unwrap(),
        |status| status.line.len() == 1,
    )
    .await;
    let second = wait("second");
    let status = until(
        "both wait",
        async || lock.status().await.unwrap(),
        |status| status.line.len() == 2,
    )
    .await;
    assert!(status.held);
    assert_eq!(status.holders.len(), 1);
    assert!(status.holders[0].owner.ends_with(":holder"));
    assert!(status.line[0].ends_with(":first"), "{:?}", status.line);
    assert!(status.line[1].ends_with(":second"), "{:?}", status.line);
    assert_eq!(status.mode, None);
    // The plain lock API sees the same line.
    assert_eq!(
        client.lock("queue:1").status().await.unwrap().line,
        status.line
    );

    guard.release().await.unwrap();
    let first = first
        .await
        .unwrap()
        .expect("the first waiter gets the lock");
    let status = lock.status().await.unwrap();
    assert!(status.holders[0].owner.ends_with(":first"));
    assert_eq!(status.line.len(), 1);
    assert!(status.line[0].ends_with(":second"));
    first.release().await.unwrap();
    second.await.unwrap().unwrap().release().await.unwrap();
    assert!(lock.status().await.unwrap().line.is_empty());
}

#[tokio::test]
async fn listing_includes_read_write_locks_with_their_mode() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let plain = client.lock("res:a").acquire().await.unwrap();
    let read = client.read_write_lock("res:b").read().await.unwrap();
    let write = client.read_write_lock("res:c").write().await.unwrap();
    let fair = client.fair_lock("res:d").acquire().await.unwrap();
    // A hash with a `mode` no read-write lock writes is not a lock.
    let () = admin.hset("res:e", "mode", "banana").await.unwrap();

    let listed = client.locks("res:").await.unwrap();
    let found: Vec<(&str, Option<LockMode>)> = listed
        .iter()
        .map(|status| (status.name.as_str(), status.mode))
        .collect();
    assert_eq!(
        found,
        [
            ("res:a", None),
            ("res:b", Some(LockMode::Read)),
            ("res:c", Some(LockMode::Write)),
            ("res:d", None),
        ]
    );
    assert!(matches!(
        client.lock("res:e").status().await,
        Err(Error::WrongType { .. })
    ));
    plain.release().await.unwrap();
    read.release().await.unwrap();
    write.release().await.unwrap();
    fair.release().await.unwrap();
    assert!(client.locks("res:").await.unwrap().is_empty());
}

/// A token lock's key may hold anything another program wrote under the
/// name: status, force unlock and listing read it without a panic or a
/// protocol error, and say what is there.
#[tokio::test]
async fn token_status_force_unlock_and_listing_read_odd_string_values() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let huge = "x".repeat(4 << 20);
    let binary: Vec<u8> = vec![0xff, 0x00, 0xfe, b':', 0x80];
    let () = admin.pset_ex("odd:empty", "", 60_000).await.unwrap();
    let () = admin.pset_ex("odd:huge", &huge, 60_000).await.unwrap();
    let () = admin.pset_ex("odd:binary", &binary, 60_000).await.unwrap();
    let () = admin.set("odd:forever", "f3a9c2d1").await.unwrap();
    let () = admin.pset_ex("odd:number", 42, 60_000).await.unwrap();

    let empty = client.token_lock("odd:empty").status().await.unwrap();
    assert!(empty.held);
    assert_eq!(empty.holders[0].owner, "");
    let big = client.token_lock("odd:huge").status().await.unwrap();
    assert_eq!(big.holders[0].owner.len(), huge.len());
    let bytes = client.token_lock("odd:binary").status().await.unwrap();
    assert!(bytes.held);
    let forever = client.token_lock("odd:forever").status().await.unwrap();
    assert!(forever.held);
    assert_eq!(forever.ttl, None, "no expiry: no ttl");
    let number = client.token_lock("odd:number").status().await.unwrap();
    assert_eq!(number.holders[0].owner, "42");

    let listed: Vec<String> = client
        .locks("odd:")
        .await
        .unwrap()
        .into_iter()
        .map(|status| status.name)
        .collect();
    // Anything but a number under a lease is listed; a string without a
    // lease that is no owner token is not.
    assert_eq!(listed, ["odd:binary", "odd:empty", "odd:huge"]);

    for name in [
        "odd:empty",
        "odd:huge",
        "odd:binary",
        "odd:forever",
        "odd:number",
    ] {
        assert!(
            client.token_lock(name).force_unlock().await.unwrap(),
            "{name} not deleted"
        );
        assert!(!client.token_lock(name).status().await.unwrap().held);
    }
}

/// A lock's own fencing counter (per-name counters) holding something that
/// is no number: status still reads the lock, with no last token.
#[tokio::test]
async fn status_reads_a_lock_whose_per_name_counter_is_bad_data() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .per_name_token_counters(true)
        .connect()
        .await
        .unwrap();
    let mut admin = common::admin(&server).await;
    let () = admin
        .set("redisson_lock_token:{bad:a}", "not a number")
        .await
        .unwrap();
    let () = admin
        .hset("redisson_lock_token:{bad:b}", "f", "1")
        .await
        .unwrap();
    let guard = client.token_lock("bad:a").acquire().await.unwrap();
    let held = client.token_lock("bad:a").status().await;
    assert!(
        matches!(&held, Ok(status) if status.held && status.last_token.is_none()),
        "{held:?}"
    );
    guard.release().await.unwrap();
    let free = client.lock("bad:a").status().await;
    assert!(
        matches!(&free, Ok(status) if !status.held && status.last_token.is_none()),
        "{free:?}"
    );
    let hashed = client.lock("bad:b").status().await;
    assert!(
        matches!(&hashed, Ok(status) if !status.held && status.last_token.is_none()),
        "{hashed:?}"
    );
}

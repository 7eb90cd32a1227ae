//! The read-write lock: shared reads, exclusive writes, no writer starvation,
//! downgrade, re-entry, loss, cancellation.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

fn writers_key(name: &str) -> String {
    format!("redlatch_rwlock_writers:{{{name}}}")
}

async fn hash(
    admin: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> HashMap<String, String> {
    admin.hgetall(name).await.unwrap()
}

#[tokio::test]
async fn readers_in_separate_clients_hold_it_at_once() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let mut guards = Vec::new();
    for _ in 0..5 {
        let client = common::client(&server).await;
        let guard = client
            .read_write_lock("shared")
            .read_within(Some(Duration::from_secs(2)))
            .await
            .expect("a reader waits for no other reader");
        guards.push((client, guard));
    }
    assert!(guards.iter().all(|(_, guard)| guard.is_held()));
    let fields = hash(&mut admin, "shared").await;
    assert_eq!(fields.get("mode").map(String::as_str), Some("read"));
    assert_eq!(fields.len(), 6, "mode and five readers: {fields:?}");
    let tokens: Vec<u64> = guards.iter().map(|(_, guard)| guard.token()).collect();
    assert!(tokens.windows(2).all(|pair| pair[0] < pair[1]));
    for (_, guard) in guards {
        guard.release().await.unwrap();
    }
    let keys: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
    assert_eq!(keys, vec!["redlatch_lock_token".to_owned()]);
}

#[tokio::test]
async fn a_writer_excludes_readers_and_writers_and_readers_exclude_writers() {
    let server = common::server();
    let writer = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = other.read_write_lock("exclusive");

    let write = writer.read_write_lock("exclusive").write().await.unwrap();
    assert!(lock.try_read().await.unwrap().is_none());
    assert!(lock.try_write().await.unwrap().is_none());
    assert!(matches!(
        lock.read_within(Some(Duration::from_millis(150))).await,
        Err(redlatch::Error::Timeout { .. })
    ));
    let fields = hash(&mut admin, "exclusive").await;
    assert_eq!(fields.get("mode").map(String::as_str), Some("write"));
    assert_eq!(fields.get(write.owner()).map(String::as_str), Some("1"));
    assert!(write.owner().ends_with(":write"));

    // A reader parked behind the writer enters on its release message.
    let parked = tokio::spawn({
        let lock = lock.clone();
        async move { lock.read().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    write.release().await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(2), parked)
        .await
        .expect("the release wakes the reader")
        .unwrap();

    // Readers hold: writers wait.
    assert!(
        writer
            .read_write_lock("exclusive")
            .try_write()
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        writer
            .read_write_lock("exclusive")
            .write_within(Some(Duration::from_millis(150)))
            .await,
        Err(redlatch::Error::Timeout { .. })
    ));
    let claims: i64 = admin.zcard(writers_key("exclusive")).await.unwrap();
    assert_eq!(claims, 0, "a timed-out writer withdraws its claim");
    read.release().await.unwrap();
    assert!(
        writer
            .read_write_lock("exclusive")
            .try_write()
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_writer_is_not_starved_by_a_stream_of_readers() {
    let server = common::server();
    let writer = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reading = Arc::new(AtomicUsize::new(0));
    let most_at_once = Arc::new(AtomicUsize::new(0));
    let reads_done = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for index in 0..6u64 {
        let client = common::client(&server).await;
        let (stop, reading, most_at_once, reads_done) = (
            stop.clone(),
            reading.clone(),
            most_at_once.clone(),
            reads_done.clone(),
        );
        readers.push(tokio::spawn(async move {
            // Staggered starts: the reads overlap, so the lock is never free.
            tokio::time::sleep(Duration::from_millis(index * 7)).await;
            let lock = client.read_write_lock("busy");
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.read().await.unwrap();
                let now = reading.fetch_add(1, Ordering::SeqCst) + 1;
                most_at_once.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(40)).await;
                reading.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
                reads_done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        most_at_once.load(Ordering::SeqCst) >= 2,
        "the readers do not overlap"
    );

    let asked = Instant::now();
    let write = writer
        .read_write_lock("busy")
        .write_within(Some(Duration::from_secs(10)))
        .await
        .expect("the writer gets in despite the stream of readers");
    let waited = asked.elapsed();
    eprintln!(
        "writer waited {waited:?} among 6 readers ({} reads done)",
        reads_done.load(Ordering::SeqCst)
    );
    assert!(waited <= Duration::from_secs(5), "writer waited {waited:?}");
    // Alone: no reader holds while it writes.
    let fields = hash(&mut admin, "busy").await;
    assert_eq!(
        fields.len(),
        3,
        "mode, the writer and its token only: {fields:?}"
    );
    assert_eq!(reading.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(reading.load(Ordering::SeqCst), 0, "a reader got in");
    let before = reads_done.load(Ordering::SeqCst);
    write.release().await.unwrap();

    // The readers carry on after the writer.
    assert!(
        common::eventually(Duration::from_secs(3), || {
            let reads_done = reads_done.clone();
            async move { reads_done.load(Ordering::SeqCst) > before }
        })
        .await
    );
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
}

#[tokio::test]
async fn a_writer_downgrades_to_read_and_lets_readers_in() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.read_write_lock("downgrade");

    let write = lock.write().await.unwrap();
    let write_token = write.token();
    let read = write.downgrade().await.unwrap();
    assert!(read.token() > write_token);
    assert!(read.is_held());
    let fields = hash(&mut admin, "downgrade").await;
    assert_eq!(fields.get("mode").map(String::as_str), Some("read"));
    assert_eq!(fields.get(read.owner()).map(String::as_str), Some("1"));
    assert_eq!(fields.len(), 2, "the write hold is gone: {fields:?}");

    let others = other.read_write_lock("downgrade");
    assert!(others.try_write().await.unwrap().is_none());
    let shared = others.try_read().await.unwrap().expect("readers may join");
    shared.release().await.unwrap();
    read.release().await.unwrap();
    assert!(others.try_write().await.unwrap().is_some());
}

#[tokio::test]
async fn reads_and_writes_reenter_and_count_holds() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;

    let named = client.read_write_lock("again").with_owner("request-9");
    let first = named.read().await.unwrap();
    let second = named.read().await.unwrap();
    let third = first.reenter().await.unwrap();
    assert_eq!(first.token(), second.token());
    assert_eq!(first.token(), third.token());
    let owner = first.owner().to_owned();
    assert_eq!(owner, format!("{}:request-9", client.id()));
    let count: i64 = admin.hget("again", &owner).await.unwrap();
    assert_eq!(count, 3);
    for n in 1..=3 {
        let key = format!("{{again}}:{owner}:rwlock_timeout:{n}");
        let pttl: i64 = admin.pttl(&key).await.unwrap();
        assert!(pttl > 0, "{key} missing");
    }
    drop(third);
    second.release().await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            let owner = owner.clone();
            async move {
                admin
                    .hget::<_, _, Option<i64>>("again", &owner)
                    .await
                    .unwrap()
                    == Some(1)
            }
        })
        .await
    );
    first.release().await.unwrap();
    let left: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
    assert_eq!(left, vec!["redlatch_lock_token".to_owned()]);

    let write = named.write().await.unwrap();
    let inner = write.reenter().await.unwrap();
    let by_name = named.write().await.unwrap();
    assert_eq!(write.token(), inner.token());
    let count: i64 = admin.hget("again", write.owner()).await.unwrap();
    assert_eq!(count, 3);
    drop((inner, by_name));
    assert!(
        other
            .read_write_lock("again")
            .try_read()
            .await
            .unwrap()
            .is_none()
    );
    write.release().await.unwrap();
    assert!(
        other
            .read_write_lock("again")
            .try_read()
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_reader_reenters_while_a_writer_waits_but_new_readers_queue() {
    let server = common::server();
    let client = common::client(&server).await;
    let writer = common::client(&server).await;
    let newcomer = common::client(&server).await;
    let mut admin = common::admin(&server).await;

    let read = client.read_write_lock("queue").read().await.unwrap();
    let waiting = tokio::spawn({
        let lock = writer.read_write_lock("queue");
        async move { lock.write().await.unwrap() }
    });
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            async move { admin.zcard::<_, i64>(writers_key("queue")).await.unwrap() == 1 }
        })
        .await,
        "the waiting writer claims its place"
    );
    assert!(
        newcomer
            .read_write_lock("queue")
            .try_read()
            .await
            .unwrap()
            .is_none(),
        "a new reader overtook the waiting writer"
    );
    let again = tokio::time::timeout(Duration::from_secs(2), read.reenter())
        .await
        .expect("re-entry must not wait for the writer (deadlock)")
        .unwrap();
    drop(again);
    read.release().await.unwrap();
    let write = tokio::time::timeout(Duration::from_secs(3), waiting)
        .await
        .expect("the last reader's release wakes the writer")
        .unwrap();
    assert!(write.is_held());
    let claims: i64 = admin.zcard(writers_key("queue")).await.unwrap();
    assert_eq!(claims, 0, "taking the lock withdraws the claim");
}

#[tokio::test]
async fn cancelled_writer_withdraws_its_claim_and_wakes_readers() {
    let server = common::server();
    let holder = common::client(&server).await;
    let writer = common::client(&server).await;
    let reader = common::client(&server).await;
    let mut admin = common::admin(&server).await;

    let read = holder.read_write_lock("cancel").read().await.unwrap();
    let waiting = tokio::spawn({
        let lock = writer.read_write_lock("cancel");
        async move { lock.write().await }
    });
    assert!(
        common::eventually(Duration::from_secs(2), || {
            let mut admin = admin.clone();
            async move { admin.zcard::<_, i64>(writers_key("cancel")).await.unwrap() == 1 }
        })
        .await
    );
    // A reader queued behind the writer's claim (5 s place lease).
    let queued = tokio::spawn({
        let lock = reader.read_write_lock("cancel");
        async move { lock.read().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !queued.is_finished(),
        "the reader did not queue behind the writer"
    );

    let cancelled_at = Instant::now();
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    let joined = tokio::time::timeout(Duration::from_secs(3), queued)
        .await
        .expect("withdrawing the claim wakes the queued reader")
        .unwrap();
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(3),
        "woken only when the claim lapsed"
    );
    let claims: bool = admin.exists(writers_key("cancel")).await.unwrap();
    assert!(!claims, "the claim is gone");
    joined.release().await.unwrap();
    read.release().await.unwrap();
    let keys: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
    assert_eq!(keys, vec!["redlatch_lock_token".to_owned()]);
}

#[tokio::test]
async fn watchdog_renews_read_holds_and_guards_see_the_key_deleted() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let other = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let mut admin = common::admin(&server).await;
    let lock = client.read_write_lock("renewed");

    let read = lock.read().await.unwrap();
    let also = other.read_write_lock("renewed").read().await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(read.is_held() && also.is_held());
    let timeout_key = format!("{{renewed}}:{}:rwlock_timeout:1", read.owner());
    let pttl: i64 = admin.pttl(&timeout_key).await.unwrap();
    assert!(pttl > 0, "the read hold's timeout key was not renewed");

    let _: () = admin.del("renewed").await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), read.lost())
        .await
        .expect("lost() resolves once the lock is deleted");
    tokio::time::timeout(Duration::from_secs(3), also.lost())
        .await
        .expect("every reader learns it");
    assert_eq!(read.lost_reason(), Some(redlatch::LostReason::Gone));
    assert!(matches!(
        read.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));

    let write = lock.write().await.unwrap();
    let _: () = admin.del("renewed").await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), write.lost())
        .await
        .expect("a writer learns it too");
}

#[tokio::test]
async fn acquires_dropped_at_any_point_leave_nothing_behind() {
    let server = common::server();
    let client = common::client(&server).await;
    let holder = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.read_write_lock("dropped");
    for round in 0..40u64 {
        let limit = Duration::from_micros(round * 20);
        let _ = tokio::time::timeout(limit, lock.read()).await;
        let _ = tokio::time::timeout(limit, lock.write()).await;
    }
    // Writers dropped while claiming or waiting behind a reader.
    let read = holder.read_write_lock("dropped").read().await.unwrap();
    for round in 0..60u64 {
        let _ = tokio::time::timeout(Duration::from_micros(round * 50), lock.write()).await;
    }
    read.release().await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(3), || {
            let mut admin = admin.clone();
            async move {
                let keys: Vec<String> = common::keys_once_holders_unnamed(&mut admin).await;
                keys == vec!["redlatch_lock_token".to_owned()]
            }
        })
        .await,
        "left behind: {:?}",
        admin.keys::<_, Vec<String>>("*").await.unwrap()
    );
    assert!(lock.try_write().await.unwrap().is_some());
}

#[tokio::test]
async fn fixed_lease_holds_run_out_on_both_sides() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lease = Duration::from_millis(300);
    let lock = client.read_write_lock("fixed").with_lease(lease);

    let read = lock.read().await.unwrap();
    let timeout_key = format!("{{fixed}}:{}:rwlock_timeout:1", read.owner());
    let pttl: i64 = admin.pttl(&timeout_key).await.unwrap();
    assert!(pttl > 0 && pttl <= 300, "read hold timeout key pttl {pttl}");
    let write = tokio::time::timeout(
        Duration::from_secs(5),
        other.read_write_lock("fixed").write(),
    )
    .await
    .expect("the reader's fixed lease ran out")
    .unwrap();
    tokio::time::timeout(Duration::from_secs(2), read.lost())
        .await
        .expect("the reader learns it");
    assert_eq!(read.lost_reason(), Some(redlatch::LostReason::LeaseRanOut));
    write.release().await.unwrap();

    let write = lock.write().await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), write.lost())
        .await
        .expect("the writer's fixed lease runs out");
    // lost() fires a drift margin before Redis drops the key: allow for it.
    let read = other
        .read_write_lock("fixed")
        .read_within(Some(Duration::from_secs(2)))
        .await
        .expect("free once the writer's lease ran out");
    read.release().await.unwrap();
}

#[tokio::test]
async fn an_owner_that_reads_is_refused_the_write_instead_of_waiting_for_itself() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.read_write_lock("upgrade").with_owner("job-1");
    let read = lock.read().await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(2), lock.write())
        .await
        .expect("refused at once, not left waiting");
    assert!(matches!(
        refused,
        Err(redlatch::Error::WouldDeadlock { .. })
    ));
    read.release().await.unwrap();
    assert!(lock.try_write().await.unwrap().is_some());
}

/// Named owners are told apart by mode: owner "job" writing and owner
/// "job:write" reading are two owners, so the read must not count as a
/// re-entry of the write (the suffix is reserved: the name is refused).
#[tokio::test]
async fn a_named_read_does_not_reenter_a_write_of_another_owner() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.read_write_lock("modes");
    let write = lock.clone().with_owner("job").write().await.unwrap();
    let read = lock.clone().with_owner("job:write").try_read().await;
    let holds = hash(&mut admin, "modes").await;
    assert!(
        matches!(read, Ok(None) | Err(redlatch::Error::InvalidOwner { .. })),
        "owner 'job:write' read while owner 'job' writes: {read:?}, {holds:?}"
    );
    let counts: Vec<_> = holds
        .iter()
        .filter(|(field, _)| !["mode", "redlatch_token"].contains(&field.as_str()))
        .collect();
    assert_eq!(counts.len(), 1, "{holds:?}");
    assert_eq!(
        counts[0].1, "1",
        "the write hold was counted twice: {holds:?}"
    );
    write.release().await.unwrap();
}

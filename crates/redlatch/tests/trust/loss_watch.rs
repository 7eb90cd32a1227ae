//! The loss watch under attack (issue 35): bad data in a watched key, a
//! tracking table smaller than the holds, and this client's own
//! force-unlock. Each test failed before its fix.

use std::time::{Duration, Instant};

use redlatch::LostReason;

use crate::common;
use crate::support::{connections_received, hexists_calls, info_counter};

/// Generous: the watch promises 50 ms on loopback.
const NOTICED_WITHIN: Duration = Duration::from_secs(2);

async fn admin_cmd(server: &testkit::RedisServer, words: &[&str]) {
    let mut admin = common::admin(server).await;
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    let _: redis::Value = cmd.query_async(&mut admin).await.unwrap();
}

/// Defect 1: `SET <lock> x` made every read of the watch fail as if the
/// connection broke: a reconnect storm (1,400+ connections in 2 s), the
/// hold never reported lost, the client's other holds unwatched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_key_overwritten_with_another_type_is_lost_without_a_reconnect_storm() {
    let server = common::server();
    let client = common::client(&server).await;
    let fixed = client
        .lock("overwritten")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let other = client.lock("overwritten:other").acquire().await.unwrap();
    // Past the watch's settling time: both keys are tracked.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let connections_before = connections_received(&server).await;
    admin_cmd(&server, &["SET", "overwritten", "x"]).await;
    let started = Instant::now();
    tokio::time::timeout(NOTICED_WITHIN, fixed.lost())
        .await
        .expect("a key that is no longer a lock hash went unnoticed");
    eprintln!("overwritten: lost noticed after {:?}", started.elapsed());
    assert!(!fixed.is_held());
    assert_eq!(fixed.lost_reason(), Some(LostReason::Gone));
    // The client's other hold is still watched: its loss is found at once.
    admin_cmd(&server, &["DEL", "overwritten:other"]).await;
    tokio::time::timeout(NOTICED_WITHIN, other.lost())
        .await
        .expect("the client's other hold went unwatched");
    // Keep the bad key there a while: nothing may loop on it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let opened = connections_received(&server).await - connections_before;
    // The test's own admin connections (one per command) and a reconnect
    // or two at most; the storm opened over a thousand.
    assert!(opened <= 10, "{opened} connections opened");
}

/// Defect 1, the reconnect itself: a connection that fails again at once
/// is retried after the client's retry policy, never in a tight loop.
/// Here every new watch connection is killed as soon as it shows up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_connection_killed_again_and_again_reconnects_with_backoff() {
    let server = common::server();
    let client = common::client(&server).await;
    let guard = client.lock("killed:watch").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = connections_received(&server).await;
    let mut admin = common::admin(&server).await;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        // The watch's connection is the only RESP3 one with tracking on.
        let _: redis::Value = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut admin)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let opened = connections_received(&server).await - before;
    eprintln!("killed every 5 ms for 2 s: {opened} connections opened");
    // The client reconnects its connections, the watch after a growing
    // delay (20 ms doubling, capped): tens, not hundreds (315 before).
    assert!(opened <= 100, "{opened} connections opened in 2 s");
    drop(guard);
}

/// Defect 2: with `tracking-table-max-keys 4` and 8 held locks, the
/// server evicts a tracked key (an invalidation) for each key the watch
/// reads, and the watch read each again at once: 4,000+ HEXISTS a second,
/// for ever. The reads are now bounded, and a real loss is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_holds_than_the_tracking_table_cost_a_bounded_number_of_reads() {
    let server = testkit::RedisServer::builder()
        .arg("tracking-table-max-keys", "4")
        .start()
        .expect("start redis-server");
    let client = common::client(&server).await;
    let mut guards = Vec::new();
    for index in 0..8 {
        guards.push(
            client
                .lock(format!("table:{index}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    // Let the eviction chain start and the watch settle into its rhythm.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = hexists_calls(&server).await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reads = hexists_calls(&server).await - before;
    let per_second = reads as f64 / started.elapsed().as_secs_f64();
    eprintln!("8 holds, tracking table of 4: {per_second:.0} HEXISTS/s");
    assert!(per_second < 200.0, "{per_second:.0} HEXISTS/s");
    // A real loss is still found. How soon is the watch's slowest re-read
    // (1 s) plus however late a loaded machine runs the watch's task: the
    // bound here only tells "found" from "never" (the bench times it).
    admin_cmd(&server, &["DEL", "table:3"]).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), guards[3].lost())
        .await
        .expect("a deleted key went unnoticed under tracking-table pressure");
    eprintln!(
        "deleted under pressure: noticed after {:?}",
        started.elapsed()
    );
    assert_eq!(guards[3].lost_reason(), Some(LostReason::Gone));
    for (index, guard) in guards.iter().enumerate() {
        assert_eq!(guard.is_held(), index != 3, "table:{index}");
    }
}

/// Defect 5: the guards were marked after the force-unlock's reply, and
/// the watch's read sometimes got there first: 9–17 of 300 said `Gone`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_force_unlocked_by_its_own_client_says_force_unlocked() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("own:force");
    let mut wrong = Vec::new();
    for round in 0..200 {
        let guard = lock.acquire().await.unwrap();
        // Past the settling time: the watch tracks the key.
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(lock.force_unlock().await.unwrap());
        let reason = guard.lost_reason();
        if reason != Some(LostReason::ForceUnlocked) {
            wrong.push((round, reason));
        }
    }
    assert!(wrong.is_empty(), "rounds with the wrong reason: {wrong:?}");
}

/// Red team: the server refuses a new connection for a moment (`maxclients`
/// reached: `-ERR max number of clients reached`) just when the watch
/// reconnects. That is a refusal for now, not the server refusing tracking:
/// the watch must connect again once it can, and find a later loss at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_reconnect_refused_by_a_full_server_is_tried_again() {
    let server = common::server();
    let client = common::client(&server).await;
    let guard = client
        .lock("full:server")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // One connection for the whole test: new ones are refused meanwhile.
    let mut admin = common::admin(&server).await;
    let watch_ids = common::tracking_connection_ids(&mut admin).await;
    assert_eq!(watch_ids.len(), 1, "one tracking connection: {watch_ids:?}");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    let connected = list.lines().count();
    // Full once the watch's connection is gone.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(connected - 1)
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&watch_ids[0])
        .query_async(&mut admin)
        .await
        .unwrap();
    // Several refused reconnects.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(10_000)
        .query_async(&mut admin)
        .await
        .unwrap();
    // Room again: past the reconnect delays, then a loss.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("full:server")
        .query_async(&mut admin)
        .await
        .unwrap();
    tokio::time::timeout(NOTICED_WITHIN, guard.lost())
        .await
        .expect("after a full server refused its reconnect, the watch never came back");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// A watch that worked, refused at a reconnect by an answer that would
/// mean "never" at the first connect (here NOAUTH: the password changed
/// for a moment, as in a rotation; an ACL briefly denying CLIENT is the
/// same): the refusal passes, so the watch tries again after its delays,
/// and a loss after the refusal ended is found at once. (It used to turn
/// the watch off for the client's life: a fixed-lease hold then learned of
/// a loss only when its lease ran out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_refused_at_a_reconnect_comes_back_once_the_refusal_ends() {
    let server = common::server();
    let client = common::client(&server).await;
    let guard = client
        .lock("rotated:password")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Authenticated already: it keeps working through the change.
    let mut admin = common::admin(&server).await;
    let watch_id = common::tracking_connection_ids(&mut admin)
        .await
        .pop()
        .expect("the watch's connection");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("rotating")
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&watch_id)
        .query_async(&mut admin)
        .await
        .unwrap();
    // Reconnects refused with NOAUTH meanwhile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("")
        .query_async(&mut admin)
        .await
        .unwrap();
    // Judged from the watch's return, not a guess at its delays: the
    // server sees a tracking connection again.
    let back = common::eventually(Duration::from_secs(10), || {
        let server = &server;
        async move {
            let mut admin = common::admin(server).await;
            !common::tracking_connection_ids(&mut admin).await.is_empty()
        }
    })
    .await;
    assert!(back, "the watch never came back after a refused reconnect");
    // Read the key again on return, then a loss.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("rotated:password")
        .query_async(&mut admin)
        .await
        .unwrap();
    tokio::time::timeout(NOTICED_WITHIN, guard.lost())
        .await
        .expect("the loss after the refusal went unnoticed");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// Red team: thousands of holds on one client, all lost at once (a
/// flush). Each is reported lost, promptly, with one read each (or so),
/// no reconnection, and the holder record, which named them, goes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_holds_flushed_at_once_are_each_lost_with_one_read() {
    const HOLDS: usize = 2_000;
    let server = common::server();
    let client = common::client(&server).await;
    let locks: Vec<redlatch::Lock> = (0..HOLDS)
        .map(|index| {
            client
                .lock(format!("many:{index}"))
                .with_lease(Duration::from_secs(60))
        })
        .collect();
    let acquires = locks.iter().map(redlatch::Lock::acquire);
    let guards: Vec<redlatch::Guard> = futures_util::future::try_join_all(acquires).await.unwrap();
    // Every hold read once (settled) and named.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (reads_before, connections_before) = (
        hexists_calls(&server).await,
        connections_received(&server).await,
    );
    admin_cmd(&server, &["FLUSHALL"]).await;
    let started = Instant::now();
    for (index, guard) in guards.iter().enumerate() {
        tokio::time::timeout(NOTICED_WITHIN, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("many:{index} was never found lost"));
        assert_eq!(guard.lost_reason(), Some(LostReason::Gone), "many:{index}");
    }
    eprintln!(
        "{HOLDS} holds flushed: all lost after {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let reads = hexists_calls(&server).await - reads_before;
    let opened = connections_received(&server).await - connections_before;
    eprintln!("{reads} HEXISTS, {opened} connections");
    assert!(reads <= 2 * HOLDS as u64, "{reads} reads for {HOLDS} holds");
    // The test's own admin connections only.
    assert!(opened <= 6, "{opened} connections opened");
    let mut admin = common::admin(&server).await;
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("*redlatch_holder*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(records.is_empty(), "records of lost holds: {records:?}");
}

/// Red team: a server that closes idle connections (`timeout 1`) closes
/// the watch's, which only listens, every second or two. Each close costs
/// a reconnection and a read of every held key, no more; and a loss right
/// after one is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_idle_connections_costs_the_watch_a_reconnect_each_time() {
    const HOLDS: usize = 50;
    let server = testkit::RedisServer::builder()
        .arg("timeout", "1")
        .start()
        .expect("start redis-server");
    let client = common::client(&server).await;
    let mut guards = Vec::new();
    for index in 0..HOLDS {
        guards.push(
            client
                .lock(format!("idle:{index}"))
                .with_lease(Duration::from_secs(60))
                .acquire()
                .await
                .unwrap(),
        );
    }
    let (reads_before, connections_before) = (
        hexists_calls(&server).await,
        connections_received(&server).await,
    );
    let started = Instant::now();
    // The server's idle check runs about ten times a second.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reads = hexists_calls(&server).await - reads_before;
    let opened = connections_received(&server).await - connections_before;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "timeout 1, {HOLDS} idle holds: {:.1} connections/s, {:.0} HEXISTS/s",
        opened as f64 / seconds,
        reads as f64 / seconds
    );
    // At most a reconnection (and a read of every key) per second.
    assert!(
        (opened as f64) <= 2.0 * seconds + 4.0,
        "{opened} connections"
    );
    assert!(
        (reads as f64) <= (HOLDS as f64) * (seconds + 1.0),
        "{reads} HEXISTS"
    );
    admin_cmd(&server, &["DEL", "idle:7"]).await;
    tokio::time::timeout(NOTICED_WITHIN, guards[7].lost())
        .await
        .expect("a loss after the server closed the idle watch went unnoticed");
    assert!(
        guards
            .iter()
            .enumerate()
            .all(|(index, guard)| guard.is_held() == (index != 7))
    );
}

/// Red team: a force-unlock marks this client's holds on the key lost when
/// its reply comes; a hold this client took after the force-unlock ran in
/// Redis (its reply read late: a future polled rarely, a busy runtime) is
/// held all the same and must not be marked. Marked, it says lost while
/// Redis has it, is never renewed nor released, and the lock stays taken
/// until its lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_marks_only_the_holds_it_took_down() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("forced:then:taken");
    // One poll sends the force-unlock; on a loaded machine that poll may
    // rarely find its answer already there: then the round starts again.
    let mut tries = 0;
    let (old, mut unlock) = loop {
        tries += 1;
        let old = lock.acquire().await.unwrap();
        let mut unlock = Box::pin(lock.force_unlock());
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(unlock.as_mut().poll(cx))).await;
        if first.is_pending() {
            break (old, unlock);
        }
        eprintln!("the force-unlock answered its first poll: {first:?}");
        assert!(
            tries < 5,
            "the force-unlock answered its first poll {tries} times"
        );
    };
    let mut admin = common::admin(&server).await;
    let ran = common::eventually(Duration::from_secs(2), || {
        let mut admin = admin.clone();
        async move {
            let exists: i64 = redis::cmd("EXISTS")
                .arg("forced:then:taken")
                .query_async(&mut admin)
                .await
                .unwrap();
            exists == 0
        }
    })
    .await;
    assert!(ran, "the force-unlock never ran");
    // Taken again, by this client, before the force-unlock's reply is read.
    let new = lock.acquire().await.unwrap();
    assert!(
        unlock.as_mut().await.unwrap(),
        "the force-unlock deleted nothing"
    );
    assert_eq!(old.lost_reason(), Some(LostReason::ForceUnlocked));
    let in_redis: bool = redis::cmd("HEXISTS")
        .arg("forced:then:taken")
        .arg(new.owner())
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(in_redis, "the new hold is not in Redis");
    assert!(
        new.is_held(),
        "a hold taken after the force-unlock ran was marked lost ({:?}) while Redis has it",
        new.lost_reason()
    );
    new.release().await.unwrap();
}

/// Issue 36: every renewal changes its lock's key, and the watch paid for
/// each: the server pushed an invalidation and the watch read the key back
/// (a second HEXISTS per renewed hold; 0.18 of a core for Redis at 10,000
/// locks renewed a second, against 0.05 with the watch off). Renewals now
/// leave the keys watched without a read back; and a DEL, a force-unlock by
/// another client, an overwrite, an expiry and a flush right after a round
/// of renewals are still found by the watch, before the next round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_cost_the_watch_no_read_back_and_leave_the_keys_watched() {
    const HOLDS: usize = 12;
    // Renewed every second; the losses are caused 300 ms after a round.
    let lease = Duration::from_secs(3);
    let server = common::server();
    let client = common::client_with_lease(&server, lease).await;
    let other = common::client(&server).await;
    let started = Instant::now();
    let mut guards = Vec::new();
    for index in 0..HOLDS {
        guards.push(
            client
                .lock(format!("renewed:{index}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    let read = client.read_write_lock("renewed:rw").read().await.unwrap();
    // Past the settling time: every key read once, and tracked.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (hexists_before, pexpire_before) = hexists_and_pexpire_calls(&server).await;
    // Two rounds of renewals (at 1 s and 2 s), then 300 ms.
    tokio::time::sleep(
        (started + Duration::from_millis(2_300)).saturating_duration_since(Instant::now()),
    )
    .await;
    let (hexists_after, pexpire_after) = hexists_and_pexpire_calls(&server).await;
    // Each renewal of a lock runs one HEXISTS and one PEXPIRE in its
    // script (a read hold's: HGET and two PEXPIREs); any other HEXISTS is
    // the watch reading a key back.
    let renewals = pexpire_after - pexpire_before;
    let read_back = (hexists_after - hexists_before).saturating_sub(renewals);
    let per_renewal = read_back as f64 / renewals.max(1) as f64;
    eprintln!("{renewals} renewals, {read_back} reads back: {per_renewal:.2} per renewal");
    assert!(
        renewals >= HOLDS as u64,
        "only {renewals} renewals in two rounds"
    );
    assert!(
        per_renewal < 0.2,
        "{read_back} reads back for {renewals} renewals"
    );
    // Losses right after the second round, each found before the third.
    let found_within = Duration::from_millis(600);
    admin_cmd(&server, &["DEL", "renewed:0"]).await;
    assert!(other.lock("renewed:1").force_unlock().await.unwrap());
    admin_cmd(&server, &["SET", "renewed:2", "x"]).await;
    admin_cmd(&server, &["PEXPIRE", "renewed:3", "50"]).await;
    let caused = Instant::now();
    for (index, how) in ["deleted", "force-unlocked", "overwritten", "expired"]
        .iter()
        .enumerate()
    {
        tokio::time::timeout(
            found_within.saturating_sub(caused.elapsed()),
            guards[index].lost(),
        )
        .await
        .unwrap_or_else(|_| panic!("renewed:{index} {how} after renewals went unnoticed"));
        assert_eq!(guards[index].lost_reason(), Some(LostReason::Gone), "{how}");
    }
    eprintln!(
        "four losses after renewals found within {:?}",
        caused.elapsed()
    );
    assert!(guards[4..].iter().all(|guard| guard.is_held()));
    admin_cmd(&server, &["FLUSHALL"]).await;
    let flushed = Instant::now();
    for guard in &guards[4..] {
        tokio::time::timeout(found_within, guard.lost())
            .await
            .expect("a renewed hold flushed went unnoticed");
    }
    tokio::time::timeout(found_within, read.lost())
        .await
        .expect("a renewed read hold flushed went unnoticed");
    eprintln!("flush after renewals found within {:?}", flushed.elapsed());
}

/// HEXISTS and PEXPIRE calls the server ran so far.
async fn hexists_and_pexpire_calls(server: &testkit::RedisServer) -> (u64, u64) {
    (
        hexists_calls(server).await,
        info_counter(server, "commandstats", "cmdstat_pexpire").await,
    )
}

/// Red team of the renewals through the watch (issue 36): the watch's
/// connection stalls (a half-dead TCP connection, a proxy that stops
/// forwarding it) while the command connection stays sound. Before: every
/// renewal went to the stalled connection, timed out there with no time
/// left for the command connection, and was tried there again; the hold
/// was lost (`NotRenewed`) after one lease, and the watch, hearing nothing,
/// never found a DEL either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_connection_costs_no_renewal_and_is_replaced() {
    let server = common::server();
    let proxy = staller::Staller::start(server.addr());
    // Renewed every 500 ms; the response timeout is 500 ms.
    let lease = Duration::from_millis(1_500);
    let client = common::client_at(&proxy.url(), lease).await;
    let guard = client.lock("stalled:watch").acquire().await.unwrap();
    let fixed = client
        .lock("stalled:fixed")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    // Past the settling time: the keys are tracked on the watch connection.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(proxy.stall_watch(), 1, "one watch connection");
    // Four leases with the watch's connection stalled.
    tokio::time::sleep(lease * 4).await;
    assert!(
        guard.is_held(),
        "a hold lost while only the watch's connection stalled: {:?}",
        guard.lost_reason()
    );
    assert!(crate::support::pttl(&server, "stalled:watch").await > 0);
    // The watch watches again, on a new connection: losses are found.
    admin_cmd(&server, &["DEL", "stalled:watch"]).await;
    admin_cmd(&server, &["DEL", "stalled:fixed"]).await;
    tokio::time::timeout(NOTICED_WITHIN, guard.lost())
        .await
        .expect("a DEL went unnoticed after the watch's connection stalled");
    tokio::time::timeout(NOTICED_WITHIN, fixed.lost())
        .await
        .expect("a fixed-lease hold's DEL went unnoticed after the watch's connection stalled");
    assert_eq!(fixed.lost_reason(), Some(LostReason::Gone));
    proxy.heal();
}

/// A TCP proxy that can stall, one by one, the connections that turned
/// tracking on (the loss watch's): nothing passes either way until healed.
mod staller {
    use std::io::{Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::Duration;

    #[derive(Default)]
    struct Link {
        watch: AtomicBool,
        stalled: AtomicBool,
    }

    pub struct Staller {
        port: u16,
        links: Arc<Mutex<Vec<Arc<Link>>>>,
    }

    impl Staller {
        pub fn start(upstream: SocketAddr) -> Staller {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let links: Arc<Mutex<Vec<Arc<Link>>>> = Arc::default();
            let accepted = links.clone();
            thread::spawn(move || {
                for client in listener.incoming() {
                    let Ok(client) = client else { return };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let link = Arc::new(Link::default());
                    accepted.lock().unwrap().push(link.clone());
                    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                    pump(client, server, link.clone(), true);
                    pump(s2, c2, link, false);
                }
            });
            Staller { port, links }
        }

        pub fn url(&self) -> String {
            format!("redis://127.0.0.1:{}", self.port)
        }

        /// Stalls the watch connections open now; how many.
        pub fn stall_watch(&self) -> usize {
            let links = self.links.lock().unwrap();
            let watches = links
                .iter()
                .filter(|link| link.watch.load(Ordering::SeqCst));
            watches
                .inspect(|link| link.stalled.store(true, Ordering::SeqCst))
                .count()
        }

        pub fn heal(&self) {
            for link in self.links.lock().unwrap().iter() {
                link.stalled.store(false, Ordering::SeqCst);
            }
        }
    }

    fn pump(mut from: TcpStream, mut to: TcpStream, link: Arc<Link>, requests: bool) {
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = to.shutdown(Shutdown::Both);
                        return;
                    }
                    Ok(n) => n,
                };
                if requests && buf[..n].windows(8).any(|w| w == b"TRACKING") {
                    link.watch.store(true, Ordering::SeqCst);
                }
                while link.stalled.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(5));
                }
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        });
    }
}

/// Issue 38: invalidations name keys without their database, so writes to
/// the same name in another database reach the watch of a DB 0 hold, each
/// soon after the watch's last read. They are no loss, and no sign of a
/// full tracking table either: before, the watch took them for evictions,
/// reconnected without NOLOOP and sent every renewal back to the command
/// connection for the client's life.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_the_same_name_in_another_database_are_no_loss_and_no_full_table() {
    let server = common::server();
    let client = common::client(&server).await;
    let guard = client.lock("same:name").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut db5 = redis::Client::open(format!("{}/5", server.url()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let before = connections_received(&server).await;
    for round in 0..40 {
        let _: () = redis::cmd("SET")
            .arg("same:name")
            .arg(round)
            .query_async(&mut db5)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let _: () = redis::cmd("DEL")
        .arg("same:name")
        .query_async(&mut db5)
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHDB").query_async(&mut db5).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        guard.is_held(),
        "another database's key was taken for the lock: {:?}",
        guard.lost_reason()
    );
    // This count's own connection, and no reconnection of the watch.
    let opened = connections_received(&server).await - before;
    assert!(
        opened <= 1,
        "the watch reconnected ({opened} connections): another database's writes were taken for a full tracking table"
    );
    // The hold is still watched: its own key's loss is found at once.
    admin_cmd(&server, &["DEL", "same:name"]).await;
    tokio::time::timeout(NOTICED_WITHIN, guard.lost())
        .await
        .expect("the DB 0 hold went unwatched");
    assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
}

/// The watchdog keeps its holds in a slab of pages (`engine/paged.rs`),
/// and the holder record its published holds in pages too: a place freed
/// by a release is given to the next hold, in another page than the one
/// it was first in. Rounds of more holds than a page (256), each on new
/// keys, so that every round's holds take places ended holds of other keys
/// had: a key deleted behind the client's back is found lost on its own
/// hold (none other), every other hold is still renewed past its lease,
/// and the record names exactly the holds left after half are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_is_found_on_its_own_hold_after_released_holds_places_were_reused() {
    const HOLDS: usize = 300;
    const ROUNDS: usize = 5;
    const LEASE: Duration = Duration::from_secs(2);
    let server = common::server();
    let client = common::client_with_lease(&server, LEASE).await;
    let mut admin = common::admin(&server).await;
    for round in 0..ROUNDS {
        let acquires = (0..HOLDS).map(|index| {
            let lock = client.lock(format!("reuse:{round}:{index}"));
            async move { lock.acquire().await }
        });
        let mut guards: Vec<Option<redlatch::Guard>> = futures_util::future::try_join_all(acquires)
            .await
            .unwrap()
            .into_iter()
            .map(Some)
            .collect();
        let victim = (round * 97 + 13) % HOLDS;
        let _: i64 = redis::cmd("DEL")
            .arg(format!("reuse:{round}:{victim}"))
            .query_async(&mut admin)
            .await
            .unwrap();
        let lost = guards[victim].as_ref().unwrap();
        tokio::time::timeout(NOTICED_WITHIN, lost.lost())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the deleted key's hold was never lost"));
        assert_eq!(lost.lost_reason(), Some(LostReason::Gone), "round {round}");
        guards[victim] = None;
        if round == 0 {
            // Past the lease: every other hold was renewed, on its place.
            tokio::time::sleep(LEASE + LEASE / 2).await;
        }
        let wrongly_lost: Vec<usize> = (0..HOLDS)
            .filter(|&index| {
                guards[index]
                    .as_ref()
                    .is_some_and(|guard| !guard.is_held() || guard.lost_reason().is_some())
            })
            .collect();
        assert!(
            wrongly_lost.is_empty(),
            "round {round}: holds lost though their keys stand: {wrongly_lost:?}"
        );
        // Every other hold released, from the end: the free places are
        // given back out of order.
        for index in (0..HOLDS).rev().step_by(2) {
            if let Some(guard) = guards[index].take() {
                guard.release().await.unwrap();
            }
        }
        let left = guards.iter().flatten().count() as i64;
        let named = common::eventually(Duration::from_secs(5), || {
            let mut admin = admin.clone();
            async move {
                let records: Vec<String> = redis::cmd("KEYS")
                    .arg("*redlatch_holder:*")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
                let mut fields = 0;
                for record in records {
                    let names: Vec<String> = redis::cmd("HKEYS")
                        .arg(&record)
                        .query_async(&mut admin)
                        .await
                        .unwrap();
                    fields += names.iter().filter(|name| name.contains("reuse:")).count() as i64;
                }
                fields == left
            }
        })
        .await;
        assert!(
            named,
            "round {round}: the record does not name the {left} holds left"
        );
        for guard in guards.into_iter().flatten() {
            guard.release().await.unwrap();
        }
    }
}

/// The loss watch finds a key's holds through a table of the holds
/// themselves (`engine/watched_holds.rs`), each placed by hashing the key
/// it reads through the hold: a hold that ended can no longer say its key.
/// Rounds on the multi-thread runtime in which the previous round's holds
/// are released while this round's are acquired and watched (the table
/// grows while holds end behind it): each key deleted behind the client's
/// back is found lost on its own hold, by the watch (the default lease's
/// first renewal comes 10 s in, after the test), and every other hold is
/// still held. Then a named owner's key held again at once after a release
/// (the ended hold's slot may still be in the table, on the same key):
/// deleted, the live hold is found lost. A table that placed a grown slot
/// by any other hash than its key's failed this test (round 0: hold 7 never lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_ending_while_the_watch_s_table_grows_leave_every_loss_found() {
    const HOLDS: usize = 400;
    const ROUNDS: usize = 4;
    const VICTIMS: usize = 3;
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut previous: Vec<redlatch::Guard> = Vec::new();
    for round in 0..ROUNDS {
        let acquires = (0..HOLDS).map(|index| {
            let lock = client.lock(format!("grow:{round}:{index}"));
            async move { lock.acquire().await }
        });
        let releases = previous.drain(..).map(|guard| guard.release());
        let (guards, released) = tokio::join!(
            futures_util::future::try_join_all(acquires),
            futures_util::future::try_join_all(releases),
        );
        released.unwrap();
        let mut guards: Vec<Option<redlatch::Guard>> =
            guards.unwrap().into_iter().map(Some).collect();
        // Watched by now (the watch reads a hold 10 ms in).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let victims: Vec<usize> = (0..VICTIMS)
            .map(|n| (round * 131 + n * 101 + 7) % HOLDS)
            .collect();
        for victim in &victims {
            let _: i64 = redis::cmd("DEL")
                .arg(format!("grow:{round}:{victim}"))
                .query_async(&mut admin)
                .await
                .unwrap();
        }
        for victim in &victims {
            let lost = guards[*victim].take().unwrap();
            tokio::time::timeout(NOTICED_WITHIN, lost.lost())
                .await
                .unwrap_or_else(|_| panic!("round {round}: hold {victim} was never lost"));
            assert_eq!(lost.lost_reason(), Some(LostReason::Gone), "round {round}");
        }
        let wrongly_lost: Vec<usize> = (0..HOLDS)
            .filter(|&index| {
                guards[index]
                    .as_ref()
                    .is_some_and(|guard| !guard.is_held() || guard.lost_reason().is_some())
            })
            .collect();
        assert!(
            wrongly_lost.is_empty(),
            "round {round}: holds lost though their keys stand: {wrongly_lost:?}"
        );
        previous = guards.into_iter().flatten().collect();
    }
    let lock = client.lock("grow:twice").with_owner("the-owner");
    let first = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.release().await.unwrap();
    let again = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("grow:twice")
        .query_async(&mut admin)
        .await
        .unwrap();
    tokio::time::timeout(NOTICED_WITHIN, again.lost())
        .await
        .expect("the named owner's second hold was never lost");
    assert_eq!(again.lost_reason(), Some(LostReason::Gone));
    for guard in previous {
        guard.release().await.unwrap();
    }
}

/// Red team of the watch's table of holds (`engine/watched_holds.rs`),
/// where the holds of one key share its hash: many readers of one
/// read-write lock in this client, on several keys, and plain locks
/// released and taken again at once by another hold of the client. A key
/// deleted behind the client's back marks exactly its own holds lost
/// (every reader of it), no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_s_holds_are_lost_together_and_no_other_hold_is() {
    const KEYS: usize = 12;
    const READERS: usize = 8;
    const PLAIN: usize = 200;
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut readers: Vec<Vec<redlatch::ReadGuard>> = Vec::new();
    for key in 0..KEYS {
        let lock = client.read_write_lock(format!("readers:{key}"));
        let mut of_key = Vec::new();
        for _ in 0..READERS {
            of_key.push(lock.read().await.unwrap());
        }
        readers.push(of_key);
    }
    // Plain locks, each released and taken at once by another hold of the
    // client (the ended hold's slot sits on the same key's hash).
    let mut plain = Vec::new();
    for index in 0..PLAIN {
        let lock = client.lock(format!("again:{index}"));
        let first = lock.acquire().await.unwrap();
        if index % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        first.release().await.unwrap();
        plain.push(Some(lock.acquire().await.unwrap()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for victim in [3, 7] {
        let _: i64 = redis::cmd("DEL")
            .arg(format!("readers:{victim}"))
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    let plain_victims = [5, 150];
    for victim in plain_victims {
        let _: i64 = redis::cmd("DEL")
            .arg(format!("again:{victim}"))
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    for victim in [3, 7] {
        for (n, reader) in readers[victim].iter().enumerate() {
            tokio::time::timeout(NOTICED_WITHIN, reader.lost())
                .await
                .unwrap_or_else(|_| panic!("reader {n} of readers:{victim} was never lost"));
            assert!(!reader.is_held());
            assert_eq!(reader.lost_reason(), Some(LostReason::Gone));
        }
    }
    for victim in plain_victims {
        let guard = plain[victim].take().unwrap();
        tokio::time::timeout(NOTICED_WITHIN, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("again:{victim}'s second hold was never lost"));
        assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    }
    // Given time to mark wrongly.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let wrong_readers: Vec<(usize, usize)> = readers
        .iter()
        .enumerate()
        .filter(|(key, _)| ![3, 7].contains(key))
        .flat_map(|(key, of_key)| {
            of_key
                .iter()
                .enumerate()
                .filter(|(_, reader)| !reader.is_held() || reader.lost_reason().is_some())
                .map(move |(n, _)| (key, n))
        })
        .collect();
    assert!(wrong_readers.is_empty(), "readers lost: {wrong_readers:?}");
    let wrong_plain: Vec<usize> = (0..PLAIN)
        .filter(|&index| {
            plain[index]
                .as_ref()
                .is_some_and(|guard| !guard.is_held() || guard.lost_reason().is_some())
        })
        .collect();
    assert!(wrong_plain.is_empty(), "plain holds lost: {wrong_plain:?}");
}

/// The id of the watch's connection: the one with tracking on (`t`).
async fn watch_connection_id(server: &testkit::RedisServer) -> Option<String> {
    let mut admin = common::admin(server).await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    list.lines()
        .filter(|line| {
            line.split(' ').any(|field| {
                field
                    .strip_prefix("flags=")
                    .is_some_and(|f| f.contains('t'))
            })
        })
        .find_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")))
        .map(str::to_owned)
}

/// Red team: the watch's connection killed again and again while holds
/// are taken and released around it (the table changes while the watch
/// reconnects and walks it). Afterwards each key deleted behind the
/// client's back is found lost on its hold, and no other hold is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_coming_and_going_while_the_watch_reconnects_are_all_watched_after() {
    const KEPT: usize = 300;
    const KILLS: usize = 6;
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let churn = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut kept = Vec::new();
            for index in 0..KEPT {
                let passing = client.lock(format!("churn:passing:{}", index % 17));
                let passing = passing.acquire().await.unwrap();
                kept.push(
                    client
                        .lock(format!("churn:{index}"))
                        .acquire()
                        .await
                        .unwrap(),
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
                passing.release().await.unwrap();
            }
            kept
        })
    };
    let mut killed = 0;
    while killed < KILLS {
        tokio::time::sleep(Duration::from_millis(80)).await;
        if let Some(id) = watch_connection_id(&server).await {
            let _: redis::Value = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(&id)
                .query_async(&mut admin)
                .await
                .unwrap();
            killed += 1;
        }
    }
    let mut kept: Vec<Option<redlatch::Guard>> =
        churn.await.unwrap().into_iter().map(Some).collect();
    // The watch back on a connection of its own, every hold read.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            watch_connection_id(&server).await.is_some()
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victims = [0, 1, 150, KEPT - 1];
    for victim in victims {
        let _: i64 = redis::cmd("DEL")
            .arg(format!("churn:{victim}"))
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    for victim in victims {
        let guard = kept[victim].take().unwrap();
        tokio::time::timeout(NOTICED_WITHIN, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("churn:{victim} was never lost"));
        assert_eq!(guard.lost_reason(), Some(LostReason::Gone));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let wrongly_lost: Vec<usize> = (0..KEPT)
        .filter(|&index| {
            kept[index]
                .as_ref()
                .is_some_and(|guard| !guard.is_held() || guard.lost_reason().is_some())
        })
        .collect();
    assert!(wrongly_lost.is_empty(), "holds lost: {wrongly_lost:?}");
}

/// A guard's `(is_held(), lost_reason())`, whatever its kind.
type HoldState = Box<dyn Fn() -> (bool, Option<LostReason>) + Send>;

/// A guard's `lost()`, whatever its kind.
type LostSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Red team: holds of every kind the watch reads (a lock with a fixed
/// lease, a reader and a writer of read-write locks, a token lock, a fair
/// lock), several of each, each kind's first key deleted and its second
/// expired by the server behind the client's back: exactly those holds are
/// found lost, each on its own, and the third of each kind stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_hold_is_lost_on_its_own_key_and_no_other() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut holds: Vec<(String, HoldState, LostSignal)> = Vec::new();
    macro_rules! held {
        ($name:expr, $guard:expr) => {{
            let guard = $guard;
            let lost = guard.lost();
            let guard = std::sync::Arc::new(guard);
            let seen = guard.clone();
            holds.push((
                $name,
                Box::new(move || (seen.is_held(), seen.lost_reason())),
                Box::pin(lost) as LostSignal,
            ));
            guard
        }};
    }
    let mut kept_guards: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
    for n in 0..3 {
        let name = format!("kind:fixed:{n}");
        let lock = client
            .lock(name.clone())
            .with_lease(Duration::from_secs(60));
        kept_guards.push(Box::new(held!(name, lock.acquire().await.unwrap())));
        let name = format!("kind:read:{n}");
        let lock = client.read_write_lock(name.clone());
        kept_guards.push(Box::new(held!(name, lock.read().await.unwrap())));
        let name = format!("kind:write:{n}");
        let lock = client.read_write_lock(name.clone());
        kept_guards.push(Box::new(held!(name, lock.write().await.unwrap())));
        let name = format!("kind:token:{n}");
        let lock = client.token_lock(name.clone());
        kept_guards.push(Box::new(held!(name, lock.acquire().await.unwrap())));
        let name = format!("kind:fair:{n}");
        let lock = client.fair_lock(name.clone());
        kept_guards.push(Box::new(held!(name, lock.acquire().await.unwrap())));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let existing: Vec<String> = redis::cmd("KEYS")
        .arg("kind:*")
        .query_async(&mut admin)
        .await
        .unwrap();
    for (name, _, _) in &holds {
        assert!(existing.contains(name), "{name} is not a key: {existing:?}");
    }
    let mut victims = Vec::new();
    for (name, _, _) in &holds {
        if name.ends_with(":0") {
            let _: i64 = redis::cmd("DEL")
                .arg(name)
                .query_async(&mut admin)
                .await
                .unwrap();
            victims.push(name.clone());
        } else if name.ends_with(":1") {
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(name)
                .arg(1)
                .query_async(&mut admin)
                .await
                .unwrap();
            victims.push(name.clone());
        }
    }
    // An expired key is deleted when touched or by the server's sweep.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let _: i64 = redis::cmd("EXISTS")
        .arg(victims.clone())
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut wrong = Vec::new();
    for (name, state, lost) in holds {
        if victims.contains(&name) {
            tokio::time::timeout(NOTICED_WITHIN, lost)
                .await
                .unwrap_or_else(|_| panic!("{name} was never lost"));
            assert_eq!(state(), (false, Some(LostReason::Gone)), "{name}");
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if state() != (true, None) {
                wrong.push((name, state()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "holds lost with their keys standing: {wrong:?}"
    );
    drop(kept_guards);
}

/// Red team: holds of fixed leases run out while as many renewed holds
/// of the same client are watched beside them (the server expires the
/// fixed ones' keys: invalidations the watch reads). Each fixed one is
/// lost for its lease running out, each renewed one stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_leases_run_out_beside_watched_renewed_holds_and_take_none_with_them() {
    const HOLDS: usize = 200;
    const FIXED: Duration = Duration::from_millis(400);
    let server = common::server();
    let client = common::client(&server).await;
    let acquires = (0..HOLDS).map(|index| {
        let lock = client.lock(format!("fixed:{index}")).with_lease(FIXED);
        async move { lock.acquire().await }
    });
    let fixed = futures_util::future::try_join_all(acquires).await.unwrap();
    let acquires = (0..HOLDS).map(|index| {
        let lock = client.lock(format!("renewed:{index}"));
        async move { lock.acquire().await }
    });
    let renewed = futures_util::future::try_join_all(acquires).await.unwrap();
    for guard in &fixed {
        tokio::time::timeout(FIXED + NOTICED_WITHIN, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{} never ran out", guard.name()));
    }
    // The server's expiry of the last keys, and the watch's reads of them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reasons: Vec<(&str, Option<LostReason>)> = fixed
        .iter()
        .filter(|guard| guard.is_held() || guard.lost_reason() != Some(LostReason::LeaseRanOut))
        .map(|guard| (guard.name(), guard.lost_reason()))
        .collect();
    assert!(
        reasons.is_empty(),
        "fixed leases ended otherwise: {reasons:?}"
    );
    let wrongly_lost: Vec<&str> = renewed
        .iter()
        .filter(|guard| !guard.is_held() || guard.lost_reason().is_some())
        .map(|guard| guard.name())
        .collect();
    assert!(
        wrongly_lost.is_empty(),
        "renewed holds lost: {wrongly_lost:?}"
    );
}

/// Red team: a thousand readers of one read-write lock in this client,
/// taken together (a thousand holds of one key in the watch's table; each
/// reader taken changes the key), and a plain lock held beside them whose
/// key is deleted 1.5 s later: its loss is found within the watch's
/// bound, not behind the readers' key. Fails in 5 runs of 9: the plain
/// lock found lost 7.6 s after its key's deletion (0.3 to 1.75 s in the
/// others; 43,000 to 63,000 HEXISTS by then: every invalidation of the
/// readers' key reads each of its holds again); the same before the
/// watch's table of holds (fc39744 reverted: not lost within 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "defect: a loss found 7.6 s late behind 1,000 readers of one key (5 runs of 9)"]
async fn a_thousand_readers_of_one_key_delay_no_other_loss() {
    const READERS: usize = 1_000;
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let plain = client.lock("crowd:plain").acquire().await.unwrap();
    let lock = client.read_write_lock("crowd:readers");
    let reads = (0..READERS).map(|_| lock.read());
    let readers = futures_util::future::try_join_all(reads).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _: i64 = redis::cmd("DEL")
        .arg("crowd:plain")
        .query_async(&mut admin)
        .await
        .unwrap();
    let started = Instant::now();
    let in_time = tokio::time::timeout(NOTICED_WITHIN, plain.lost()).await;
    let _ = tokio::time::timeout(Duration::from_secs(30), plain.lost()).await;
    eprintln!(
        "the plain lock lost {:?} after its key's deletion ({} HEXISTS by then)",
        started.elapsed(),
        hexists_calls(&server).await
    );
    in_time.expect("the plain lock beside the readers was not found lost in time");
    assert!(readers.iter().all(redlatch::ReadGuard::is_held));
}

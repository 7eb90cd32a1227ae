//! Fencing tokens, status snapshots and force-unlock.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

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

#[cfg(feature = "holder-records")]
/// Every hold's client names itself beside the lock (host, pid, program,
/// since when, purpose), for every lock kind; the name goes within a
/// refresh after the hold ends; the lock hash keeps Redisson's layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_holder_and_the_name_goes_with_the_hold() {
    let server = common::server();
    let holder = redlatch::Client::builder(&server.url())
        .key_prefix("app:")
        .holder_purpose("nightly report")
        .connect()
        .await
        .unwrap();
    let reader = redlatch::Client::builder(&server.url())
        .key_prefix("app:")
        .connect()
        .await
        .unwrap();
    let before = std::time::SystemTime::now();
    let plain = holder.lock("report").acquire().await.unwrap();
    let fair = holder.fair_lock("report-fair").acquire().await.unwrap();
    let read = holder.read_write_lock("report-rw").read().await.unwrap();

    for name in ["report", "report-fair", "report-rw"] {
        let named = common::eventually(Duration::from_secs(5), || {
            let lock = reader.lock(name);
            async move {
                let status = lock.status().await.unwrap();
                status
                    .holders
                    .iter()
                    .all(|holder| holder.identity.is_some())
            }
        })
        .await;
        assert!(named, "{name}: the holder was not named within 5 s");
        let status = reader.lock(name).status().await.unwrap();
        let identity = status.holders[0].identity.clone().unwrap();
        assert_eq!(identity.pid, std::process::id(), "{name}");
        assert_eq!(identity.purpose.as_deref(), Some("nightly report"));
        let program = std::env::current_exe().unwrap();
        assert_eq!(
            identity.program,
            program.file_name().unwrap().to_string_lossy(),
            "{name}"
        );
        assert!(!identity.host.is_empty());
        // The server's clock and this machine's are the same here.
        let since = identity.since.expect("since");
        let slack = Duration::from_secs(1);
        assert!(
            since + slack >= before,
            "{name}: since {since:?} before {before:?}"
        );
        assert!(since <= std::time::SystemTime::now() + slack, "{name}");
    }
    // The listing names them too.
    let listed = reader.locks("report").await.unwrap();
    assert!(
        listed
            .iter()
            .all(|lock| lock.holders.iter().all(|holder| holder.identity.is_some())),
        "{listed:?}"
    );

    // Redisson's layout: the lock hash holds the owner field, and beside
    // it only the hold's token (a field no owner can have: no ':').
    let mut admin = common::admin(&server).await;
    let mut fields: Vec<String> = admin.hkeys("app:report").await.unwrap();
    fields.sort();
    assert_eq!(
        fields,
        vec![plain.owner().to_owned(), "redlatch_token".to_owned()]
    );

    let record = format!("app:redlatch_holder:{{{}}}", &plain.owner()[..36]);
    plain.release().await.unwrap();
    fair.release().await.unwrap();
    read.release().await.unwrap();
    let gone = common::eventually(Duration::from_secs(5), || {
        let server = &server;
        let record = record.clone();
        async move {
            let mut admin = common::admin(server).await;
            let fields: Vec<String> = admin.hkeys(&record).await.unwrap();
            !fields.iter().any(|field| field.starts_with("h:"))
        }
    })
    .await;
    assert!(gone, "the holds stayed named after their release");
}

#[cfg(feature = "holder-records")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_name_itself_writes_no_record() {
    let server = common::server();
    let quiet = redlatch::Client::builder(&server.url())
        .holder_identity(false)
        .connect()
        .await
        .unwrap();
    let guard = quiet.lock("quiet").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = quiet.lock("quiet").status().await.unwrap();
    assert_eq!(status.holders[0].identity, None);
    let mut admin = common::admin(&server).await;
    let records: Vec<String> = admin.keys("*redlatch_holder*").await.unwrap();
    assert!(records.is_empty(), "{records:?}");
    guard.release().await.unwrap();
}

/// A client dropped right after its last release takes its record with it:
/// the refresh that would have deleted it never comes, so the task deletes
/// it on the way out (it used to stay for its 60 s TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_takes_its_record_with_it() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    for round in 0..5 {
        let client = common::client(&server).await;
        let guard = client
            .lock(format!("brief-{round}"))
            .acquire()
            .await
            .unwrap();
        // Long enough to be published (holds are named after about 50 ms).
        let published = common::eventually(Duration::from_secs(5), || {
            let server = &server;
            async move {
                let mut admin = common::admin(server).await;
                let records: Vec<String> = admin.keys("*redlatch_holder*").await.unwrap();
                !records.is_empty()
            }
        })
        .await;
        assert!(published, "round {round}: the hold was never named");
        guard.release().await.unwrap();
        drop(client);
        let keys = common::keys_once_holders_unnamed(&mut admin).await;
        assert!(
            keys.iter().all(|key| !key.contains("redlatch_holder")),
            "round {round}: the record outlived its client: {keys:?}"
        );
    }
}

/// Reads the holder records on `server` until none is left or `limit`
/// passes; returns those left.
fn records_left_after(server: &testkit::RedisServer, limit: Duration) -> Vec<String> {
    let mut conn = server.conn();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let records: Vec<String> = redis::cmd("KEYS")
            .arg("*redlatch_holder*")
            .query(&mut conn)
            .expect("KEYS");
        if records.is_empty() || std::time::Instant::now() >= deadline {
            return records;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `#[tokio::main]` shape: acquire, hold long enough to be named,
/// release (or not), drop the client, and the runtime ends with `main`. The
/// record's refresh and withdrawal are tasks that never run once the
/// runtime stops, so the record used to stay for its TTL (58 s left 1.5 s
/// later). It must go with the runtime, on either kind of runtime, whether
/// the last hold was released or was still held when the program ended.
#[test]
fn a_program_that_ends_with_its_runtime_leaves_no_holder_record() {
    let server = common::server();
    for (round, (multi_thread, release)) in
        [(false, true), (true, true), (false, false), (true, false)]
            .into_iter()
            .enumerate()
    {
        let runtime = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .expect("runtime");
        let url = server.url();
        let guard = runtime.block_on(async move {
            let client = common::client_at(&url, redlatch::Settings::DEFAULT_LEASE).await;
            let guard = client
                .lock(format!("ends-with-main-{round}"))
                .acquire()
                .await
                .unwrap();
            // Named after about 50 ms: 300 ms is a hold any `list` shows.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let guard = if release {
                guard.release().await.unwrap();
                None
            } else {
                Some(guard)
            };
            drop(client);
            guard
        });
        let named: Vec<String> = redis::cmd("KEYS")
            .arg("*redlatch_holder*")
            .query(&mut server.conn())
            .unwrap();
        assert!(
            !named.is_empty() || release,
            "round {round}: a held lock's holder was never named"
        );
        drop(runtime);
        drop(guard);
        let left = records_left_after(&server, Duration::from_secs(1));
        assert!(
            left.is_empty(),
            "round {round} (multi_thread: {multi_thread}, released: {release}): \
             the record outlived its program: {left:?}"
        );
    }
}

/// The record lives a few seconds past its last refresh, so a holder that
/// could not take it out leaves it briefly; a live holder whose record
/// lapsed (a stall longer than its TTL, an eviction) writes it again whole,
/// its holds included, at the next refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_record_lives_seconds_and_comes_back_whole_after_it_lapsed() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = common::client(&server).await;
    let guard = client.lock("named-long").acquire().await.unwrap();
    let record = format!("redlatch_holder:{{{}}}", client.id());
    let holds_of = |fields: &std::collections::HashMap<String, String>| {
        fields
            .keys()
            .filter(|field| field.starts_with("h:") && field.ends_with("named-long"))
            .count()
    };
    let named = common::eventually(Duration::from_secs(5), || {
        let (server, record) = (&server, record.clone());
        async move {
            let mut admin = common::admin(server).await;
            let fields: std::collections::HashMap<String, String> =
                admin.hgetall(&record).await.unwrap();
            holds_of(&fields) == 1
        }
    })
    .await;
    assert!(named, "the hold was never named in {record}");
    let ttl: i64 = admin.pttl(&record).await.unwrap();
    assert!(
        (1..=5_000).contains(&ttl),
        "a record lives at most 5 s past its refresh: PTTL {ttl}"
    );
    // As if it had expired: only the record goes, the lock stays held.
    let _: () = admin.del(&record).await.unwrap();
    let back = common::eventually(Duration::from_secs(5), || {
        let (server, record) = (&server, record.clone());
        async move {
            let mut admin = common::admin(server).await;
            let fields: std::collections::HashMap<String, String> =
                admin.hgetall(&record).await.unwrap();
            fields.contains_key("pid") && holds_of(&fields) == 1
        }
    })
    .await;
    assert!(guard.is_held());
    assert!(
        back,
        "the record did not come back whole while the hold lived"
    );
    guard.release().await.unwrap();
}

/// Red team: a program that ends with its runtime while Redis is stalled
/// (SIGSTOP), with several clients that each hold a named lock. Each
/// client's last word (its record's deletion, on a connection of its own)
/// waits for an answer that cannot come; the program must not wait that
/// long once per client (it did: one limit per client, one after the
/// other, 500 ms each here). The records are left to their 5 s TTL.
#[test]
fn many_clients_ending_with_their_runtime_on_a_stalled_server_wait_once() {
    const CLIENTS: usize = 8;
    for multi_thread in [false, true] {
        // A server per round: the first round's stall is not the second's.
        let server = common::server();
        let runtime = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .expect("runtime");
        let url = server.url();
        let guards = runtime.block_on(async move {
            let mut guards = Vec::new();
            for n in 0..CLIENTS {
                let client = common::client_at(&url, redlatch::Settings::DEFAULT_LEASE).await;
                let guard = client
                    .lock(format!("stalled-end-{multi_thread}-{n}"))
                    .acquire()
                    .await
                    .unwrap();
                guards.push((client, guard));
            }
            // Named after about 50 ms.
            tokio::time::sleep(Duration::from_millis(300)).await;
            guards
        });
        let named: Vec<String> = redis::cmd("KEYS")
            .arg("*redlatch_holder*")
            .query(&mut server.conn())
            .unwrap();
        assert_eq!(named.len(), CLIENTS, "every client named its holds");
        server.pause().expect("SIGSTOP");
        let started = std::time::Instant::now();
        drop(runtime);
        let ended_in = started.elapsed();
        server.resume().expect("SIGCONT");
        drop(guards);
        eprintln!("multi_thread {multi_thread}: the runtime stopped in {ended_in:?}");
        // One last word's limit (500 ms here) and a margin; eight in a
        // row took 4 s.
        assert!(
            ended_in < Duration::from_millis(2_000),
            "multi_thread {multi_thread}: {CLIENTS} clients ending on a stalled server \
             kept the program {ended_in:?}"
        );
        // Whatever is left goes with its TTL.
        let left = records_left_after(&server, Duration::from_secs(7));
        assert!(left.is_empty(), "records outlived their TTL: {left:?}");
    }
}

/// Red team: a client dropped while its server is stalled (SIGSTOP), its
/// runtime running on. Its record's withdrawal waits the response timeout
/// and fails; the task then ended, and its drop sent the last word meant
/// for a stopped runtime: blocking the runtime's thread for a second, with
/// every other task of the program on it.
#[test]
fn a_client_dropped_on_a_stalled_server_never_blocks_its_runtime() {
    let server = common::server();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = server.url();
    let longest_gap = runtime.block_on(async {
        // The default response timeout (3 s): the last word's limit is 1 s.
        let client = redlatch::Client::builder(&url).connect().await.unwrap();
        let guard = client.lock("stalled-drop").acquire().await.unwrap();
        // Named after about 50 ms.
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Released, still named until the next refresh: the client goes
        // with its record to withdraw.
        guard.release().await.unwrap();
        server.pause().expect("SIGSTOP");
        drop(client);
        // What else runs on this runtime: a ticker.
        let mut longest_gap = Duration::ZERO;
        let mut last = std::time::Instant::now();
        let until = last + Duration::from_secs(5);
        while std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
            longest_gap = longest_gap.max(last.elapsed());
            last = std::time::Instant::now();
        }
        server.resume().expect("SIGCONT");
        longest_gap
    });
    eprintln!("the longest tick of the runtime: {longest_gap:?}");
    // A blocked thread stops it a whole second; a loaded machine, far less.
    assert!(
        longest_gap < Duration::from_millis(600),
        "the runtime stood still {longest_gap:?} while a client was dropped"
    );
}

/// Red team: a record that lapsed (a stall longer than its TTL, an
/// eviction) is written again whole at the next refresh, unless a new hold
/// is named first: that write made a record of the new hold alone, the
/// refresh found it there, and the older holds stayed unnamed for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_lapsed_comes_back_whole_even_when_a_new_hold_is_named_first() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = common::client(&server).await;
    let record = format!("redlatch_holder:{{{}}}", client.id());
    let named = |fields: &std::collections::HashMap<String, String>, name: &str| {
        fields
            .keys()
            .any(|field| field.starts_with("h:") && field.ends_with(name))
    };
    let older = client.lock("lapsed-older").acquire().await.unwrap();
    let published = common::eventually(Duration::from_secs(5), || {
        let (server, record) = (&server, record.clone());
        async move {
            let mut admin = common::admin(server).await;
            let fields: std::collections::HashMap<String, String> =
                admin.hgetall(&record).await.unwrap();
            named(&fields, "lapsed-older")
        }
    })
    .await;
    assert!(published, "the older hold was never named");
    // As if it had expired; a new hold is named (50 ms) before the next
    // refresh (within 1 s) most of the time.
    let _: () = admin.del(&record).await.unwrap();
    let newer = client.lock("lapsed-newer").acquire().await.unwrap();
    // Past the naming and two refreshes.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let fields: std::collections::HashMap<String, String> = admin.hgetall(&record).await.unwrap();
    assert!(
        named(&fields, "lapsed-newer"),
        "the newer hold is unnamed: {fields:?}"
    );
    assert!(
        named(&fields, "lapsed-older"),
        "the older hold stayed unnamed after its record lapsed: {fields:?}"
    );
    newer.release().await.unwrap();
    older.release().await.unwrap();
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

//! Holder records (the `holder-records` feature): a status names each
//! holder from its client's record, and the record lives and goes with the
//! holds, the client and its runtime, on a sound or a stalled server.

use std::time::Duration;

use redis::AsyncCommands;

use crate::common;

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
                // The record (named by an earlier hold's write) and this
                // hold's field in it: the field may come a write later.
                status.holders.iter().all(|holder| {
                    holder
                        .identity
                        .as_ref()
                        .is_some_and(|identity| identity.since.is_some())
                })
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

/// The holder records on the server now.
fn records_now(conn: &mut redis::Connection) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*redlatch_holder*")
        .query(conn)
        .expect("KEYS")
}

/// A runtime of the kind a program's `main` builds: multi-thread (two
/// workers) or current-thread.
fn runtime(multi_thread: bool) -> tokio::runtime::Runtime {
    if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .expect("runtime")
}

/// Reads the holder records on `server` until none is left or `limit`
/// passes; returns those left.
fn records_left_after(server: &testkit::RedisServer, limit: Duration) -> Vec<String> {
    let mut conn = server.conn();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let records = records_now(&mut conn);
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
        let runtime = runtime(multi_thread);
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
        let named = records_now(&mut server.conn());
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
        let runtime = runtime(multi_thread);
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
        let named = records_now(&mut server.conn());
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

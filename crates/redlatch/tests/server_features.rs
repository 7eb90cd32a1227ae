//! What the server offers, learned at connect and used: the function
//! library, WAITAOF, `CLIENT NO-EVICT`, and the shapes of managed services that refuse
//! commands (an ACL or `rename-command` in the test server's config).
//! Runs on every server of the matrix (scripts/test-servers); a feature a
//! server lacks is checked for its fallback there.

#![recursion_limit = "256"]

mod common;
#[path = "server_features/out_of_memory.rs"]
mod out_of_memory;
#[path = "server_features/token_lock.rs"]
mod token_lock;

use std::time::Duration;

use redlatch::{Client, Error, Support};
use testkit::RedisServer;

/// `INFO commandstats` and `INFO errorstats` as `name -> calls` (commands)
/// and `name -> count` (errors); FCALLs the server refused or that failed
/// as `fcall_refused`.
async fn stats(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let errors: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(conn)
        .await
        .unwrap();
    let fcall = info
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_fcall:"))
        .unwrap_or_default();
    let refused: u64 = fcall
        .split(',')
        .filter_map(|field| {
            let (name, n) = field.trim().split_once('=')?;
            matches!(name, "rejected_calls" | "failed_calls").then(|| n.parse::<u64>().ok())?
        })
        .sum();
    info.lines()
        .chain(errors.lines())
        .filter_map(|line| {
            let (name, fields) = line.trim().split_once(':')?;
            let count = fields.split(',').find_map(|field| {
                field
                    .strip_prefix("calls=")
                    .or(field.strip_prefix("count="))
            })?;
            Some((name.to_owned(), count.parse().ok()?))
        })
        .chain([("fcall_refused".to_owned(), refused)])
        .collect()
}

fn count(stats: &[(String, u64)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(stat, _)| stat == name)
        .map_or(0, |(_, n)| *n)
}

fn server_has_functions(client: &Client) -> bool {
    client
        .capabilities()
        .server
        .as_ref()
        .is_some_and(|server| server.version.0 >= 7)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_as_functions_of_one_library_loaded_at_connect() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    if !server_has_functions(&client) {
        assert_eq!(client.capabilities().functions, Support::Absent);
        return;
    }
    assert_eq!(client.capabilities().functions, Support::Available);
    let libraries: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("redlatch_*")
        .query_async(&mut admin)
        .await
        .unwrap();
    let redis::Value::Array(libraries) = libraries else {
        panic!("FUNCTION LIST answered {libraries:?}");
    };
    assert_eq!(libraries.len(), 1, "one library per redlatch version");

    // A second client of the same version finds it there.
    let other = common::client(&server).await;
    assert_eq!(other.capabilities().functions, Support::Available);

    let before = stats(&mut admin).await;
    for primitive in 0..3 {
        let name = format!("as-functions:{primitive}");
        match primitive {
            0 => {
                let guard = client.lock(&name).acquire().await.unwrap();
                let again = guard.reenter().await.unwrap();
                again.release().await.unwrap();
                guard.release().await.unwrap();
            }
            1 => {
                let lock = client.read_write_lock(&name);
                lock.read().await.unwrap().release().await.unwrap();
                lock.write().await.unwrap().release().await.unwrap();
            }
            _ => {
                let semaphore = client.semaphore(&name);
                assert!(semaphore.try_set_permits(2).await.unwrap());
                semaphore.acquire().await.unwrap().release().await.unwrap();
            }
        }
    }
    let after = stats(&mut admin).await;
    assert!(
        count(&after, "cmdstat_fcall") > count(&before, "cmdstat_fcall"),
        "{after:?}"
    );
    assert_eq!(
        count(&after, "cmdstat_evalsha"),
        count(&before, "cmdstat_evalsha"),
        "nothing ran by EVALSHA"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_persistence_between_acquire_and_release_meets_no_missing_script() {
    let mut server = RedisServer::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start()
        .unwrap();
    let client = common::client_with_lease(&server, Duration::from_secs(20)).await;
    if !server_has_functions(&client) {
        return;
    }
    // Idle before the acquire (round 1) and before each release.
    for round in 0..2 {
        let guard = client.lock("restarted").acquire().await.unwrap();
        server.restart_keeping_data().unwrap();
        // The hold came back from the append-only file, and so did the library.
        let again = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match guard.reenter().await {
                    Ok(again) => return again,
                    // The client's connection is being made again.
                    Err(error) if error.is_transient() => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(error) => panic!("round {round}: reenter after restart: {error}"),
                }
            }
        })
        .await
        .expect("reconnected within 20 s");
        again.release().await.unwrap();
        guard.release().await.unwrap();
        let mut admin = common::admin(&server).await;
        let stats = stats(&mut admin).await;
        assert_eq!(count(&stats, "errorstat_NOSCRIPT"), 0, "{stats:?}");
        assert_eq!(count(&stats, "cmdstat_script|load"), 0, "{stats:?}");
        assert_eq!(count(&stats, "cmdstat_evalsha"), 0, "{stats:?}");
        // No 'Function not found' either, and no library loaded again.
        assert_eq!(count(&stats, "fcall_refused"), 0, "{stats:?}");
        assert_eq!(count(&stats, "cmdstat_function|load"), 0, "{stats:?}");
        assert!(count(&stats, "cmdstat_fcall") >= 3, "{stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_library_is_loaded_again_on_first_use() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(600)).await;
    if !server_has_functions(&client) {
        return;
    }
    let mut admin = common::admin(&server).await;
    let renewed = client
        .lock("flushed-library:renewed")
        .acquire()
        .await
        .unwrap();
    for round in 0..5 {
        let () = redis::cmd("FUNCTION")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
        let guard = client
            .lock(format!("flushed-library:{round}"))
            .acquire()
            .await
            .expect("acquire after FUNCTION FLUSH");
        guard.release().await.expect("release after FUNCTION FLUSH");
    }
    // The watchdog's renewals found the library again too.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(renewed.is_held());
    renewed.release().await.unwrap();
    assert_eq!(client.capabilities().functions, Support::Available);
    let stats = stats(&mut admin).await;
    assert_eq!(count(&stats, "cmdstat_evalsha"), 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_turned_off_run_every_script_by_evalsha() {
    let server = common::server();
    let client = Client::builder(&server.url())
        .script_functions(false)
        .connect()
        .await
        .unwrap();
    assert_eq!(client.capabilities().functions, Support::Off);
    let guard = client.lock("by-evalsha").acquire().await.unwrap();
    guard.release().await.unwrap();
    let mut admin = common::admin(&server).await;
    let stats = stats(&mut admin).await;
    assert!(count(&stats, "cmdstat_evalsha") >= 2, "{stats:?}");
    assert_eq!(count(&stats, "cmdstat_fcall"), 0, "{stats:?}");
}

/// The library lost (FUNCTION FLUSH) and its reload refused (an ACL
/// changed meanwhile): the client turns to EVALSHA for good, and every
/// primitive keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_refused_after_it_was_lost_turns_the_client_to_evalsha() {
    let server = managed("");
    let client = Client::connect(&as_app(&server)).await.unwrap();
    if !server_has_functions(&client) {
        return;
    }
    assert_eq!(client.capabilities().functions, Support::Available);
    let mut admin = common::admin(&server).await;
    for command in [
        &["ACL", "SETUSER", "app", "-function"][..],
        &["FUNCTION", "FLUSH"],
    ] {
        let mut cmd = redis::cmd(command[0]);
        for word in &command[1..] {
            cmd.arg(*word);
        }
        let () = cmd.query_async(&mut admin).await.unwrap();
    }
    let before = stats(&mut admin).await;
    every_primitive_works(&client, "refused-reload").await;
    let after = stats(&mut admin).await;
    assert!(
        count(&after, "cmdstat_evalsha") > count(&before, "cmdstat_evalsha"),
        "{after:?}"
    );
}

/// A user of a managed service: every command but `denied`.
fn managed(denied: &str) -> RedisServer {
    RedisServer::builder()
        .arg("user", &format!("app on >app-secret ~* &* +@all {denied}"))
        .arg("user", "default on nopass ~* &* +@all")
        .start()
        .unwrap()
}

fn as_app(server: &RedisServer) -> String {
    format!("redis://app:app-secret@127.0.0.1:{}", server.port())
}

async fn every_primitive_works(client: &Client, prefix: &str) {
    let guard = client
        .lock(format!("{prefix}:lock"))
        .acquire()
        .await
        .unwrap();
    guard.reenter().await.unwrap().release().await.unwrap();
    guard.release().await.unwrap();
    let fair = client.fair_lock(format!("{prefix}:fair"));
    fair.acquire().await.unwrap().release().await.unwrap();
    let rw = client.read_write_lock(format!("{prefix}:rw"));
    rw.read().await.unwrap().release().await.unwrap();
    rw.write().await.unwrap().release().await.unwrap();
    let semaphore = client.semaphore(format!("{prefix}:semaphore"));
    assert!(semaphore.try_set_permits(1).await.unwrap());
    semaphore.acquire().await.unwrap().release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    let status = client
        .lock(format!("{prefix}:lock"))
        .status()
        .await
        .unwrap();
    assert!(status.holders.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_denies_functions_gets_every_script_by_evalsha() {
    let server = managed("-function -fcall -fcall_ro");
    let client = Client::connect(&as_app(&server)).await.unwrap();
    if server_has_functions(&client) {
        let Support::Denied(why) = &client.capabilities().functions else {
            panic!("functions: {}", client.capabilities().functions);
        };
        assert!(
            why.contains("NOPERM") || why.contains("permission"),
            "{why}"
        );
    } else {
        assert_eq!(client.capabilities().functions, Support::Absent);
    }
    every_primitive_works(&client, "no-functions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_function_command_is_reported_and_scripts_run_by_evalsha() {
    let server = RedisServer::builder()
        .arg("rename-command", "FUNCTION \"\"")
        .start()
        .unwrap();
    let client = common::client(&server).await;
    if server_has_functions(&client) {
        assert!(
            matches!(client.capabilities().functions, Support::Denied(_)),
            "{}",
            client.capabilities().functions
        );
    }
    every_primitive_works(&client, "renamed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_config_client_or_info_serves_every_primitive() {
    let server = managed("-config -client -info -command");
    let client = Client::connect(&as_app(&server)).await.unwrap();
    // Nothing to learn the version from: reported unknown, nothing fails.
    assert_eq!(client.capabilities().server, None);
    assert!(
        matches!(client.capabilities().no_evict, Support::Denied(_)),
        "NO-EVICT: {}",
        client.capabilities().no_evict
    );
    every_primitive_works(&client, "no-admin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_wait_fails_at_connect_naming_the_command() {
    let server = managed("-wait");
    let refused = Client::builder(&as_app(&server))
        .wait_for_replicas(1, Duration::from_millis(100))
        .connect()
        .await
        .expect_err("WAIT is denied");
    let Error::InvalidConfig(message) = &refused else {
        panic!("{refused:?}");
    };
    assert!(message.contains("WAIT"), "{message}");
    // Without the wait the same service serves locks.
    let client = Client::connect(&as_app(&server)).await.unwrap();
    every_primitive_works(&client, "no-wait").await;
}

/// An append-only server and a client that waits for its master's fsync.
/// Every write is fsynced before its reply, so the master's own copy is
/// confirmed at once (with `everysec` it may take a second, and a CI run
/// saw 0 of 2 copies within 50 ms).
async fn fsynced() -> (RedisServer, Client) {
    let durable = RedisServer::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start()
        .unwrap();
    let client = Client::builder(&durable.url())
        .wait_for_fsync(0, Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    (durable, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_fsync_needs_waitaof_and_an_append_only_master() {
    let plain = common::server();
    let probe = common::client(&plain).await;
    let refused = Client::builder(&plain.url())
        .wait_for_fsync(0, Duration::from_millis(200))
        .connect()
        .await
        .expect_err("no append-only file to fsync");
    let Error::InvalidConfig(message) = &refused else {
        panic!("{refused:?}");
    };
    assert!(message.contains("WAITAOF"), "{message}");
    if !probe.capabilities().wait_aof.is_available() {
        assert_eq!(probe.capabilities().wait_aof, Support::Absent);
        return;
    }
    let (durable, client) = fsynced().await;
    let guard = client.lock("fsynced").acquire().await.unwrap();
    guard.release().await.unwrap();
    // One replica asked for, none there: the acquisition is undone.
    let client = Client::builder(&durable.url())
        .wait_for_fsync(1, Duration::from_millis(50))
        .connect()
        .await
        .unwrap();
    let refused = client.lock("fsynced").try_acquire().await;
    assert!(
        matches!(
            refused,
            Err(Error::ReplicasNotConfirmed {
                acknowledged: 1,
                wanted: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    let mut admin = common::admin(&durable).await;
    assert_eq!(common::holds_left(&mut admin, "fsynced").await, 0);
}

/// This server's clients as `(id, resp, flags)`, from `CLIENT LIST`.
async fn clients(admin: &mut redis::aio::MultiplexedConnection) -> Vec<(u64, String, String)> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(admin)
        .await
        .unwrap();
    list.lines()
        .map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or_default()
                    .to_owned()
            };
            (
                field("id").parse().unwrap_or(0),
                field("resp"),
                field("flags"),
            )
        })
        .collect()
}

/// The ids of the unevictable clients (`e` among their flags) but
/// `except`, in order, each with its protocol.
async fn unevictable(
    admin: &mut redis::aio::MultiplexedConnection,
    except: u64,
) -> Vec<(u64, String)> {
    let mut ids: Vec<(u64, String)> = clients(admin)
        .await
        .into_iter()
        .filter(|(id, _, flags)| *id != except && flags.contains('e'))
        .map(|(id, resp, _)| (id, resp))
        .collect();
    ids.sort();
    ids
}

/// An admin connection the server will not evict, and its id.
async fn unevictable_admin(server: &RedisServer) -> (redis::aio::MultiplexedConnection, u64) {
    let mut admin = common::admin(server).await;
    let () = redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("ON")
        .query_async(&mut admin)
        .await
        .unwrap();
    let id: u64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut admin)
        .await
        .unwrap();
    (admin, id)
}

async fn evicted_clients(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(admin)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.trim().strip_prefix("evicted_clients:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Under `maxmemory-clients` pressure the server closes every client it
/// may: the lock client's command connection (which carries its renewals)
/// and its watch connection stay, its hold is renewed throughout, while a
/// client that did not ask is closed again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_renewing_and_watching_connections_survive_client_eviction() {
    let server = common::server();
    let client = Client::builder(&server.url())
        .default_lease(Duration::from_millis(600))
        .connect()
        .await
        .unwrap();
    if !server_has_functions(&client) {
        assert_eq!(client.capabilities().no_evict, Support::Absent);
        return;
    }
    assert_eq!(client.capabilities().no_evict, Support::Available);
    let evictable = Client::builder(&server.url())
        .no_evict(false)
        .connect()
        .await
        .unwrap();
    assert_eq!(evictable.capabilities().no_evict, Support::Off);
    let (mut admin, admin_id) = unevictable_admin(&server).await;
    let guard = client.lock("kept").acquire().await.unwrap();
    // The command connection (RESP2) and the watch connection (RESP3).
    let protected = unevictable(&mut admin, admin_id).await;
    assert_eq!(protected.len(), 2, "{protected:?}");

    let evicted_before = evicted_clients(&mut admin).await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-clients")
        .arg("1kb")
        .query_async(&mut admin)
        .await
        .unwrap();
    // Two seconds of pressure: about ten renewals of the 600 ms lease.
    let mut others_failed = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < until {
        if evictable.lock("other").try_acquire().await.is_err() {
            others_failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let evicted = evicted_clients(&mut admin).await - evicted_before;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-clients")
        .arg("0")
        .query_async(&mut admin)
        .await
        .unwrap();

    assert!(evicted > 0, "no client was evicted: no pressure");
    assert_eq!(
        unevictable(&mut admin, admin_id).await,
        protected,
        "a protected connection was closed ({evicted} evictions, {others_failed} failed calls of the other client)"
    );
    assert!(guard.is_held(), "the hold lapsed under eviction pressure");
    guard.release().await.unwrap();
}

/// The flag belongs to a connection: after a reconnection the watchdog
/// sets it again on the new one while it has holds to renew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnected_command_connection_is_made_unevictable_again() {
    let server = common::server();
    let client = Client::builder(&server.url())
        .default_lease(Duration::from_millis(600))
        .connect()
        .await
        .unwrap();
    if !client.capabilities().no_evict.is_available() {
        return;
    }
    let (mut admin, admin_id) = unevictable_admin(&server).await;
    let guard = client.lock("held").acquire().await.unwrap();
    let command: Vec<u64> = unevictable(&mut admin, admin_id)
        .await
        .into_iter()
        .filter(|(_, resp)| resp == "2")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(command.len(), 1, "{command:?}");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(command[0])
        .query_async(&mut admin)
        .await
        .unwrap();
    let killed = command[0];
    let again = common::eventually(Duration::from_secs(10), || {
        let server = &server;
        let client = &client;
        async move {
            // A call reconnects the command connection: without holder
            // records (their refresh each second) nothing else may use it.
            let _ = client.lock("nudge").status().await;
            let mut admin = common::admin(server).await;
            clients(&mut admin).await.iter().any(|(id, resp, flags)| {
                *id != admin_id && *id != killed && resp == "2" && flags.contains('e')
            })
        }
    })
    .await;
    assert!(again, "the new command connection was not made unevictable");
    assert!(guard.is_held());
    guard.release().await.unwrap();
}

/// The same for a client whose holds are all short (released before any
/// renewal is due): its new command connection is protected by its first
/// calls after the reconnection, not by renewals it never makes (the
/// watchdog used to be the only one to set the flag again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnected_client_with_short_holds_is_made_unevictable_again() {
    let server = common::server();
    let client = common::client(&server).await;
    if !client.capabilities().no_evict.is_available() {
        return;
    }
    let (mut admin, admin_id) = unevictable_admin(&server).await;
    let lock = client.lock("brief");
    lock.acquire().await.unwrap().release().await.unwrap();
    let command: Vec<u64> = unevictable(&mut admin, admin_id)
        .await
        .into_iter()
        .filter(|(_, resp)| resp == "2")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(command.len(), 1, "{command:?}");
    let killed = command[0];
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(killed)
        .query_async(&mut admin)
        .await
        .unwrap();
    // Short holds only; the first call may meet the broken connection.
    let mut cycles = 0;
    let again = common::eventually(Duration::from_secs(10), || {
        cycles += 1;
        let (server, lock) = (&server, &lock);
        async move {
            if let Ok(guard) = lock.acquire_within(Some(Duration::from_secs(1))).await {
                let _ = guard.release().await;
            }
            let mut admin = common::admin(server).await;
            clients(&mut admin).await.iter().any(|(id, resp, flags)| {
                *id != admin_id && *id != killed && resp == "2" && flags.contains('e')
            })
        }
    })
    .await;
    assert!(
        again,
        "after {cycles} short holds the new command connection is still evictable"
    );
}

/// What this server's kind and version have (each `(feature, redis since,
/// valkey since)`): the probes at connect must find the same.
fn expected_by_version(client: &Client) -> Vec<(&'static str, bool)> {
    let server = client
        .capabilities()
        .server
        .clone()
        .expect("INFO answers on the test server");
    let since = |redis: Option<(u32, u32, u32)>, valkey: Option<(u32, u32, u32)>| {
        let since = if server.name == "valkey" {
            valkey
        } else {
            redis
        };
        since.is_some_and(|since| server.version >= since)
    };
    vec![
        ("set_ifeq", since(Some((8, 4, 0)), Some((8, 1, 0)))),
        ("delifeq", since(None, Some((9, 0, 0)))),
        ("delex_ifeq", since(Some((8, 4, 0)), None)),
        ("hash_field_expiry", since(Some((7, 4, 0)), Some((9, 0, 0)))),
        ("scripting", true),
    ]
}

fn script_free_support(client: &Client) -> Vec<(&'static str, Support)> {
    let capabilities = client.capabilities();
    vec![
        ("set_ifeq", capabilities.set_ifeq.clone()),
        ("delifeq", capabilities.delifeq.clone()),
        ("delex_ifeq", capabilities.delex_ifeq.clone()),
        ("hash_field_expiry", capabilities.hash_field_expiry.clone()),
        ("scripting", capabilities.scripting.clone()),
    ]
}

/// Issue 38: `SET ... IFEQ`, `DELIFEQ`, `DELEX ... IFEQ`, hash-field expiry
/// and scripting are probed at connect, each where the server's kind and
/// version have it; the same where `COMMAND` is denied (judged by the
/// version) and for a client that runs scripts by EVALSHA; the `SET ... IFEQ`
/// probe creates no key; `summary()` names each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_free_commands_and_scripting_are_probed_where_the_server_has_them() {
    let server = managed("-command");
    let client = Client::connect(&server.url()).await.unwrap();
    let expected = expected_by_version(&client);
    let by_evalsha = Client::builder(&server.url())
        .script_functions(false)
        .connect()
        .await
        .unwrap();
    let without_command = Client::builder(&as_app(&server))
        .key_prefix("app:")
        .connect()
        .await
        .unwrap();
    for (who, client) in [
        ("default", &client),
        ("by EVALSHA", &by_evalsha),
        ("COMMAND denied", &without_command),
    ] {
        for ((feature, support), (_, has)) in script_free_support(client).iter().zip(&expected) {
            let wanted = if *has {
                Support::Available
            } else {
                Support::Absent
            };
            assert_eq!(
                *support,
                wanted,
                "{who}: {feature} on {}",
                client.capabilities().summary()
            );
        }
    }
    let summary = client.capabilities().summary();
    for name in [
        "scripting",
        "SET IFEQ",
        "DELIFEQ",
        "DELEX IFEQ",
        "hash-field expiry",
    ] {
        assert!(summary.contains(name), "{summary}");
    }
    let mut admin = common::admin(&server).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*probe*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(keys.is_empty(), "the probes left {keys:?}");
}

/// A server whose Lua module is unloaded (`MODULE UNLOAD lua`: Valkey 9.1
/// and later, where Lua is a module); `None` where Lua is built in and
/// cannot be unloaded (Redis, Valkey before 9.1).
async fn server_without_lua() -> Option<RedisServer> {
    let server = RedisServer::builder()
        .arg("enable-module-command", "yes")
        .start()
        .unwrap();
    let client = common::client(&server).await;
    let version = client.capabilities().server.clone().unwrap();
    drop(client);
    let mut admin = common::admin(&server).await;
    let unloaded = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("lua")
        .query_async::<()>(&mut admin)
        .await;
    if let (Err(error), true) = (
        &unloaded,
        version.name == "valkey" && version.version >= (9, 1, 0),
    ) {
        panic!("{version}: MODULE UNLOAD lua: {error}");
    }
    unloaded.ok().map(|()| server)
}

/// Issue 38: a server without scripting (Valkey 9.1 and later, its Lua
/// module unloaded: `EVAL` and `FUNCTION` are still listed, every script is
/// refused) is refused at connect with `Error::ServerLacks` naming
/// scripting, by functions or by EVALSHA. Failed before on Valkey 9.1.2:
/// connect succeeded, and the first acquire failed on "Could not find
/// scripting engine 'lua'". Runs where Lua is a module (scripts/test-servers
/// runs it on Valkey 9.1.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_scripting_is_refused_at_connect_naming_it() {
    let Some(server) = server_without_lua().await else {
        return;
    };
    for functions in [true, false] {
        let refused = Client::builder(&server.url())
            .script_functions(functions)
            .connect()
            .await
            .expect_err("a server without scripting");
        let Error::ServerLacks {
            missing, server, ..
        } = &refused
        else {
            panic!("functions {functions}: {refused:?}");
        };
        assert_eq!(*missing, "scripting");
        assert!(server.starts_with("valkey 9."), "{server}");
        let message = refused.to_string();
        assert!(
            message.contains("scripting") && message.contains("Lua"),
            "{message}"
        );
    }
}

/// Whether a hold of `client` learns within a second that its key was
/// deleted (the renewals of the default lease would take 10 s).
async fn loss_noticed(server: &RedisServer, client: &Client) -> bool {
    let guard = client.lock("row-watched").acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut admin = common::admin(server).await;
    let () = redis::cmd("DEL")
        .arg("row-watched")
        .query_async::<i64>(&mut admin)
        .await
        .map(drop)
        .unwrap();
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .is_ok()
}

/// One row of the compatibility table in docs/DEPLOYMENT.md, from what
/// this server does with redlatch: written to the file named by
/// `REDLATCH_COMPAT_ROW` (scripts/test-servers collects the rows of every
/// flavour into the table), printed otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatibility_row() {
    let plain = common::server();
    let client = common::client(&plain).await;
    let server = client
        .capabilities()
        .server
        .clone()
        .expect("INFO answers on the test server");
    let (major, minor, _) = server.version;
    let flavour = match server.name.as_str() {
        "valkey" => "Valkey",
        "redis" => "Redis",
        other => other,
    };
    let scripts = match &client.capabilities().functions {
        Support::Available => "functions (FCALL)",
        _ => "EVALSHA",
    };
    let restart = if client.capabilities().functions.is_available() {
        "nothing to load"
    } else {
        "scripts loaded again (NOSCRIPT)"
    };
    let denied = |support: &Support| match support {
        Support::Denied(_) => "EVALSHA (reported denied)",
        Support::Absent => "EVALSHA (absent)",
        Support::Available => "functions used (not denied?)",
        _ => "off",
    };
    let acl_denied = {
        let server = managed("-function -fcall -fcall_ro");
        let client = Client::connect(&as_app(&server)).await.unwrap();
        every_primitive_works(&client, "row-acl").await;
        denied(&client.capabilities().functions)
    };
    let renamed = {
        let server = RedisServer::builder()
            .arg("rename-command", "FUNCTION \"\"")
            .start()
            .unwrap();
        let client = common::client(&server).await;
        every_primitive_works(&client, "row-renamed").await;
        denied(&client.capabilities().functions)
    };
    let fsync = if client.capabilities().wait_aof.is_available() {
        let (_durable, client) = fsynced().await;
        client
            .lock("row-fsync")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        "works (WAITAOF)"
    } else {
        "refused at connect (no WAITAOF)"
    };
    let wait_denied = {
        let server = managed("-wait");
        let refused = Client::builder(&as_app(&server))
            .wait_for_replicas(1, Duration::from_millis(50))
            .connect()
            .await;
        assert!(
            matches!(refused, Err(Error::InvalidConfig(_))),
            "{refused:?}"
        );
        "refused at connect"
    };
    let admin_denied = {
        let server = managed("-config -client -info -command");
        let client = Client::connect(&as_app(&server)).await.unwrap();
        every_primitive_works(&client, "row-admin").await;
        match loss_noticed(&server, &client).await {
            true => "works (version unknown)",
            false => "works (version unknown; a lost hold found by the renewals)",
        }
    };
    let watch = match loss_noticed(&plain, &client).await {
        true => "at once (CLIENT TRACKING)",
        false => "at the next renewal",
    };
    let no_evict = match &client.capabilities().no_evict {
        Support::Available => "set (command and watch connections)",
        Support::Absent => "absent (evictable)",
        Support::Denied(_) => "refused (evictable)",
        _ => "off",
    };
    let capabilities = client.capabilities();
    let set_ifeq = match &capabilities.set_ifeq {
        Support::Available => "yes",
        _ => "no",
    };
    let delete_ifeq = match (
        capabilities.delifeq.is_available(),
        capabilities.delex_ifeq.is_available(),
    ) {
        (true, true) => "`DELIFEQ`, `DELEX ... IFEQ`",
        (true, false) => "`DELIFEQ`",
        (false, true) => "`DELEX ... IFEQ`",
        (false, false) => "no",
    };
    let hash_field_expiry = match &capabilities.hash_field_expiry {
        Support::Available => "yes (`HPEXPIRE`)",
        _ => "no",
    };
    assert!(capabilities.scripting.is_available(), "{capabilities:?}");
    let scripting = match server_without_lua().await {
        Some(without) => {
            let refused = Client::connect(&without.url()).await;
            assert!(
                matches!(refused, Err(Error::ServerLacks { .. })),
                "{refused:?}"
            );
            "Lua module (unloaded: refused at connect)"
        }
        None => "Lua, built in",
    };
    let row = format!(
        "| {flavour} {major}.{minor} | {scripts} | {restart} | {watch} | {fsync} | {no_evict} | {acl_denied} | {renamed} | {wait_denied} | {admin_denied} | {set_ifeq} | {delete_ifeq} | {hash_field_expiry} | {scripting} |\n"
    );
    match std::env::var_os("REDLATCH_COMPAT_ROW") {
        Some(path) => std::fs::write(path, row).expect("write the row"),
        None => print!("{row}"),
    }
}

/// Calls and refusals of `CLIENT NO-EVICT` the server counted.
async fn no_evict_sent(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_client|no-evict:"))
        .flat_map(|stats| stats.split(','))
        .filter_map(|field| {
            let (name, n) = field.trim().split_once('=')?;
            matches!(name, "calls" | "rejected_calls").then(|| n.parse::<u64>().ok())?
        })
        .sum()
}

/// Red team: a server that granted `CLIENT NO-EVICT` at connect and
/// denies it after a reconnection (an ACL changed, a failover to a server
/// configured otherwise). The denial is an answer: asking again on every
/// call after it doubles the client's commands for ever (it did: one
/// `CLIENT NO-EVICT` per call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protection_denied_after_a_reconnection_is_not_asked_again_on_every_call() {
    let server = common::server();
    let client = common::client(&server).await;
    if !client.capabilities().no_evict.is_available() {
        return;
    }
    let mut admin = common::admin(&server).await;
    let lock = client.lock("denied-later");
    lock.acquire().await.unwrap().release().await.unwrap();
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-client|no-evict")
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    let before = no_evict_sent(&mut admin).await;
    let mut cycles = 0;
    for _ in 0..50 {
        if let Ok(guard) = lock.acquire_within(Some(Duration::from_secs(1))).await {
            cycles += 1;
            let _ = guard.release().await;
        }
    }
    let asked = no_evict_sent(&mut admin).await - before;
    eprintln!("{cycles} acquire/release cycles after the denial: {asked} CLIENT NO-EVICT");
    assert!(
        cycles >= 45,
        "only {cycles} of 50 cycles after the reconnection"
    );
    // Once after the reconnection (denied), perhaps once more for the
    // watch; not once per call.
    assert!(asked <= 4, "{asked} CLIENT NO-EVICT in {cycles} cycles");
}

/// A server that closes a client's connections once idle for a second.
fn idle_closing_server() -> RedisServer {
    RedisServer::builder()
        .arg("timeout", "1")
        .start()
        .expect("start redis-server")
}

/// A client with the test timeouts and no holder records: nothing of its
/// own (the records' refresh) keeps its command connection busy.
async fn client_without_records(server: &RedisServer) -> Client {
    let builder = Client::builder(&server.url())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(20));
    #[cfg(feature = "holder-records")]
    let builder = builder.holder_identity(false);
    builder.connect().await.expect("connect to the test server")
}

/// Idles past the server's `timeout 1` (checked about ten times a second)
/// before an acquire (round 1) and before each release, none of which has
/// anything to retry it: each must find a new connection, not the closed one.
async fn acquire_and_release_after_idling(client: &Client) {
    for round in 0..2 {
        let guard = client
            .lock("idle-closed")
            .with_lease(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap_or_else(|error| panic!("round {round}: acquire after idling: {error}"));
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        guard
            .release()
            .await
            .unwrap_or_else(|error| panic!("round {round}: release after idling: {error}"));
        if round == 0 {
            tokio::time::sleep(Duration::from_millis(2_500)).await;
        }
    }
}

/// Red team: a server that closes idle connections (`timeout 1`, as managed
/// services often set) closes the client's command connection between two
/// calls a few seconds apart; the calls after it succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_the_server_closed_an_idle_connection_succeed() {
    let server = idle_closing_server();
    let client = common::client(&server).await;
    acquire_and_release_after_idling(&client).await;
}

/// As above for a client without holder records, whose refresh once a
/// second used to keep the connection busy and hid the close; and no call
/// is sent twice to get there (two acquires and two releases: four scripts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_holder_records_after_an_idle_close_succeed_each_sent_once() {
    let server = idle_closing_server();
    let client = client_without_records(&server).await;
    let before = common::script_calls(&mut common::admin(&server).await).await;
    acquire_and_release_after_idling(&client).await;
    // A fresh admin connection: the server closes idle ones too.
    let sent = common::script_calls(&mut common::admin(&server).await).await - before;
    assert_eq!(
        sent, 4,
        "{sent} script calls for two acquires and two releases"
    );
}

/// Several calls at once on a connection the server closed as idle (here
/// the application's own, through the client's connection): each goes on
/// the new connection, none meets the closed one, each is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_after_an_idle_close_all_succeed_once() {
    let server = idle_closing_server();
    let client = client_without_records(&server).await;
    let mut conn = client.redis_connection();
    let _: i64 = redis::cmd("INCR")
        .arg("idle-count")
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let mut conn = client.redis_connection();
            tokio::spawn(async move {
                redis::cmd("INCR")
                    .arg("idle-count")
                    .query_async::<i64>(&mut conn)
                    .await
            })
        })
        .collect();
    for (n, call) in calls.into_iter().enumerate() {
        call.await
            .unwrap()
            .unwrap_or_else(|error| panic!("call {n} after idling: {error}"));
    }
    let count: i64 = redis::cmd("GET")
        .arg("idle-count")
        .query_async(&mut common::admin(&server).await)
        .await
        .unwrap();
    assert_eq!(count, 9, "one INCR before idling and eight after");
}

/// A waiter parked on a server that closes idle connections is still woken
/// by the release, and a hold idle past the close is not reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_parked_across_idle_closes_is_woken_and_the_hold_kept() {
    let server = idle_closing_server();
    let holder = client_without_records(&server).await;
    let waiter = client_without_records(&server).await;
    let guard = holder
        .lock("idle-waited")
        .with_lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        waiter
            .lock("idle-waited")
            .acquire_within(Some(Duration::from_secs(30)))
            .await
    });
    // Both clients idle past the server's timeout, the waiter parked.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(!waiting.is_finished(), "the waiter got the held lock");
    assert!(
        guard.lost_reason().is_none(),
        "a live hold reported lost after idle closes: {:?}",
        guard.lost_reason()
    );
    let released = std::time::Instant::now();
    guard.release().await.expect("release after idling");
    let woken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the parked waiter was not woken")
        .unwrap()
        .expect("the waiter's acquire");
    // Woken by the release's message, not by a poll long after it.
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "woken {:?} after the release",
        released.elapsed()
    );
    drop(woken);
}

/// The least-privilege ACL of docs/DEPLOYMENT.md (its first ```acl block,
/// on one line), with `password` for `>CHANGE-ME`: `user` stripped, as
/// the test server's `--user` takes it.
fn documented_acl(password: &str) -> String {
    let doc = include_str!("../../../docs/DEPLOYMENT.md");
    let block = doc
        .split("```acl\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("an ```acl block in docs/DEPLOYMENT.md");
    let line = block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    line.strip_prefix("user ")
        .expect("the ACL block holds a `user` line")
        .replace(">CHANGE-ME", &format!(">{password}"))
}

/// The commands the scripts call (`redis.call('x'` and `redis.pcall('x'`
/// in every `.lua` file under crates/redlatch/src, each primitive's folder
/// and the shared parts of `src/scripts/lib/`, and the commands handed to
/// `memory.lua`'s wrappers), lower case. (`PUBLISH` and `SPUBLISH` come
/// as an argument, and the ACL lists both.)
fn commands_the_scripts_call() -> std::collections::BTreeSet<String> {
    fn lua_sources(dir: &std::path::Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                lua_sources(&path, into);
            } else if path.extension().is_some_and(|ext| ext == "lua") {
                into.push(std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let mut sources = Vec::new();
    lua_sources(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        &mut sources,
    );
    // Guards the walk itself: a tree it no longer finds would check nothing.
    assert!(
        !sources.is_empty(),
        "no .lua file under crates/redlatch/src"
    );
    let mut commands = std::collections::BTreeSet::new();
    for source in &sources {
        for call in [
            "redis.call('",
            "redis.pcall('",
            "give_back('",
            "unless_out_of_memory('",
        ] {
            for rest in source.split(call).skip(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphabetic())
                    .collect();
                commands.insert(name.to_ascii_lowercase());
            }
        }
    }
    commands
}

/// Red team: every command a script calls is one the documented
/// least-privilege ACL allows (Redis checks ACLs inside scripts: a command
/// left out fails the script for that user). Failed before: `zincrby`, which
/// the fair lock's line calls when a waiter takes the lock or gives up its
/// place with others behind it, was not in the ACL.
#[test]
fn the_documented_acl_allows_every_command_the_scripts_call() {
    let acl = documented_acl("x");
    let allowed: std::collections::BTreeSet<String> = acl
        .split_whitespace()
        .filter_map(|rule| rule.strip_prefix('+'))
        .map(str::to_owned)
        .collect();
    let missing: Vec<String> = commands_the_scripts_call()
        .into_iter()
        .filter(|command| !allowed.contains(command))
        .collect();
    assert!(
        missing.is_empty(),
        "called by the scripts, not allowed by docs/DEPLOYMENT.md's ACL: {missing:?}"
    );
}

/// Red team: a fair lock with a line (a holder, waiters behind it, one that
/// gives up its place), as the documented least-privilege ACL user, by
/// functions and by EVALSHA: every waiter that stays is served, and the one
/// that gives up gets a timeout, never an error. Failed before: the first
/// waiter, served while another was still in line, got `NOPERM` (the
/// fair acquire's `zincrby`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_with_a_line_works_for_the_documented_acl_user() {
    let server = RedisServer::builder()
        .arg("user", &documented_acl("locker-secret"))
        .start()
        .unwrap();
    let url = format!("redis://locker:locker-secret@127.0.0.1:{}", server.port());
    for functions in [true, false] {
        let connect = || {
            Client::builder(&url)
                .key_prefix("app:")
                .connect_timeout(Duration::from_secs(2))
                .script_functions(functions)
                .connect()
        };
        let (holder, first, second, leaving) = (
            connect().await.unwrap(),
            connect().await.unwrap(),
            connect().await.unwrap(),
            connect().await.unwrap(),
        );
        let name = format!("line-{functions}");
        let held = holder.fair_lock(name.as_str()).acquire().await.unwrap();
        let waiting = |client: Client| {
            let name = name.clone();
            tokio::spawn(async move {
                let guard = client
                    .fair_lock(name.as_str())
                    .acquire_within(Some(Duration::from_secs(10)))
                    .await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                guard.release().await
            })
        };
        let first = waiting(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = waiting(second);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Behind both, it gives up: its place goes, the others' deadlines shift.
        let gave_up = leaving
            .fair_lock(name.as_str())
            .acquire_within(Some(Duration::from_millis(300)))
            .await;
        assert!(
            matches!(gave_up, Err(Error::Timeout { .. })),
            "functions {functions}: the waiter that gave up: {gave_up:?}"
        );
        held.release().await.unwrap();
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert!(
            first.is_ok() && second.is_ok(),
            "functions {functions}: waiters in line: {first:?}, {second:?}"
        );
    }
}

/// Red team: as the documented least-privilege ACL user, a held lock's
/// status names its holder (host, pid, program) from the holder's record,
/// as `list` and `top` show it. Failed before: the record is read with
/// `HMGET`, which the ACL left out, so every holder stayed unnamed.
#[cfg(feature = "holder-records")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_is_named_for_the_documented_acl_user() {
    let server = RedisServer::builder()
        .arg("user", &documented_acl("locker-secret"))
        .start()
        .unwrap();
    let url = format!("redis://locker:locker-secret@127.0.0.1:{}", server.port());
    let client = Client::builder(&url)
        .key_prefix("app:")
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("named-holder");
    let guard = lock.acquire().await.unwrap();
    let named = common::eventually(Duration::from_secs(5), || {
        let lock = lock.clone();
        async move {
            let status = lock.status().await.unwrap();
            status
                .holders
                .iter()
                .any(|holder| holder.identity.is_some())
        }
    })
    .await;
    assert!(named, "{:?}", lock.status().await);
    guard.release().await.unwrap();
}

/// Four locks `app:{prefix}:{0..4}` held by the documented ACL user,
/// renewed every 300 ms (900 ms leases).
async fn four_renewed_holds(server: &RedisServer, prefix: &str) -> (Client, Vec<redlatch::Guard>) {
    let url = format!("redis://locker:locker-secret@127.0.0.1:{}", server.port());
    let client = Client::builder(&url)
        .key_prefix("app:")
        .connect_timeout(Duration::from_secs(2))
        .default_lease(Duration::from_millis(900))
        .connect()
        .await
        .unwrap();
    let mut guards = Vec::new();
    for index in 0..4 {
        guards.push(
            client
                .lock(format!("{prefix}:{index}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    (client, guards)
}

/// Issue 36: the watchdog's renewals of lock holds go through the loss
/// watch's connection in transactions, for the documented ACL user too;
/// a user without `MULTI`/`EXEC` keeps them on the command connection,
/// renewed all the same and still watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_take_the_watch_s_connection_only_where_transactions_are_allowed() {
    for transactions in [true, false] {
        let mut acl = documented_acl("locker-secret");
        if !transactions {
            acl = acl.replace(" +multi", "").replace(" +exec", "");
        }
        let server = RedisServer::builder().arg("user", &acl).start().unwrap();
        let (_client, guards) = four_renewed_holds(&server, "acl-renewed").await;
        // Four rounds of renewals (every 300 ms).
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert!(
            guards.iter().all(|guard| guard.is_held()),
            "transactions {transactions}"
        );
        let mut admin = common::admin(&server).await;
        let stats = stats(&mut admin).await;
        let renewals = count(&stats, "cmdstat_pexpire");
        let read_back = count(&stats, "cmdstat_hexists").saturating_sub(renewals);
        eprintln!(
            "transactions {transactions}: {renewals} renewals, {read_back} reads back, {stats:?}"
        );
        assert!(
            renewals >= 8,
            "transactions {transactions}: {renewals} renewals"
        );
        if transactions {
            assert!(count(&stats, "cmdstat_exec") >= 2, "{stats:?}");
            // The watch's first read of each key, no more.
            assert!(read_back <= 4, "{read_back} reads back: {stats:?}");
        } else {
            assert_eq!(count(&stats, "cmdstat_exec"), 0, "{stats:?}");
        }
        let _: i64 = redis::cmd("DEL")
            .arg("app:acl-renewed:2")
            .query_async(&mut admin)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_millis(250), guards[2].lost())
            .await
            .expect("a DEL after renewals went unnoticed");
    }
}

/// Issue 36, red team: the ACL takes `MULTI` (or `EXEC`) away after the
/// watch opened its route for renewals. Every renewal transaction is then
/// refused; the batch must go on the command connection and the holds stay
/// renewed (no panic in the watchdog or in the client library's connection
/// task, no hold lost). A refused `MULTI` inside a transaction made redis-rs
/// 1.x panic (debug builds) in the watch connection's task, and a hold was
/// lost now and then under load: [`ROUNDS`] scenarios per command at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_survive_transactions_taken_away_after_connect() {
    const ROUNDS: usize = 10;
    let panics_before = common::library_panics();
    let mut rounds = tokio::task::JoinSet::new();
    for round in 0..ROUNDS {
        for command in ["multi", "exec"] {
            rounds.spawn(transactions_taken_away(command, round));
        }
    }
    while let Some(round) = rounds.join_next().await {
        round.unwrap();
    }
    assert_eq!(
        common::library_panics(),
        panics_before,
        "a panic outside the tests (see the output above)"
    );
}

/// One round of [`renewals_survive_transactions_taken_away_after_connect`]:
/// `command` taken away from the ACL user while four holds are renewed.
async fn transactions_taken_away(command: &'static str, round: usize) {
    let acl = documented_acl("locker-secret");
    let server = RedisServer::builder().arg("user", &acl).start().unwrap();
    let (_client, guards) = four_renewed_holds(&server, "acl-taken").await;
    let mut admin = common::admin(&server).await;
    // A round of renewals through the route first.
    let started = std::time::Instant::now();
    while count(&stats(&mut admin).await, "cmdstat_exec") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{command}, round {round}: no renewal transaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("locker")
        .arg(format!("-{command}"))
        .query_async(&mut admin)
        .await
        .unwrap();
    let renewed_before = count(&stats(&mut admin).await, "cmdstat_pexpire");
    // Four more rounds (every 300 ms): each past the lease's end if
    // the renewals had stopped.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let renewed = count(&stats(&mut admin).await, "cmdstat_pexpire") - renewed_before;
    assert!(
        guards.iter().all(|guard| guard.is_held()),
        "{command} taken away, round {round}: a hold was lost"
    );
    assert!(
        renewed >= 8,
        "{command} taken away, round {round}: {renewed} renewals"
    );
    // And a loss is still known (by the watch or the next renewal:
    // neither is left waiting on a half-open transaction).
    let _: i64 = redis::cmd("DEL")
        .arg("app:acl-taken:1")
        .query_async(&mut admin)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), guards[1].lost())
        .await
        .unwrap_or_else(|_| panic!("{command} taken away, round {round}: a DEL went unnoticed"));
    for (index, guard) in guards.into_iter().enumerate() {
        if index != 1 {
            guard.release().await.unwrap();
        }
    }
}

/// Connections this server has besides `admin`, once their number has
/// stayed the same for 500 ms (background connections open after connect).
async fn settled_connections(admin: &redis::aio::MultiplexedConnection) -> i64 {
    common::settled(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        async move { clients(&mut admin).await.len() as i64 - 1 }
    })
    .await
}

/// Every command the server ran since `before` (a `stats` reading), but the
/// test's own `INFO`, by name: what the README's footprint table counts.
fn commands_since(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter(|(name, _)| name.starts_with("cmdstat_") && name != "cmdstat_info")
        .map(|(name, n)| (name.clone(), n - count(before, name)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The README's "What redlatch puts on your Redis": a default client keeps
/// three connections on one server (commands, subscriptions, the loss
/// watch), a lean one two; an uncontended acquire and its release are one
/// script call each, and a hold writes nothing beside its lock but the
/// client's holder record (none when lean).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_client_keeps_three_connections_and_a_lean_one_two() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    assert_eq!(settled_connections(&admin).await, 0);

    for (profile, builder, connections) in [
        ("default", Client::builder(&server.url()), 3),
        ("lean", Client::builder(&server.url()).lean(), 2),
    ] {
        let client = builder.connect().await.unwrap();
        // A hold long enough to be watched and named, and a waiter (the
        // subscription), so that every connection a client opens is open.
        let guard = client.lock("footprint").acquire().await.unwrap();
        // In a task of its own: waiting in the holder's task would be a
        // deadlock (a cycle of one), refused before it subscribes.
        let waiter = client.lock("footprint");
        let waited = tokio::spawn(async move {
            waiter
                .acquire_within(Some(Duration::from_millis(100)))
                .await
                .map(drop)
        })
        .await
        .unwrap();
        assert!(matches!(waited, Err(Error::Timeout { .. })), "{waited:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            settled_connections(&admin).await,
            connections,
            "{profile}: {:?}",
            clients(&mut admin).await
        );
        guard.release().await.unwrap();

        let before = stats(&mut admin).await;
        let guard = client.lock("cycle").acquire().await.unwrap();
        guard.release().await.unwrap();
        let cycle = commands_since(&before, &stats(&mut admin).await);
        eprintln!("{profile}: one uncontended acquire and release: {cycle:?}");
        let scripts: u64 = ["cmdstat_fcall", "cmdstat_evalsha"]
            .iter()
            .map(|name| count(&cycle, name))
            .sum();
        assert_eq!(scripts, 2, "{profile}: {cycle:?}");

        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut admin)
            .await
            .unwrap();
        keys.sort();
        eprintln!("{profile}: keys after the holds: {keys:?}");
        drop(client);
        assert_eq!(
            settled_connections(&admin).await,
            0,
            "{profile}: connections left after the client was dropped"
        );
    }
}

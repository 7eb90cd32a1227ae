//! The token lock on each server: its uncontended cycle is two plain
//! commands where the server has `DELIFEQ` (or `DELEX … IFEQ`) and
//! `SET … IFEQ`, a script release elsewhere; and a server without
//! scripting (Valkey 9.1 with its Lua module unloaded) still serves it,
//! with a clear error for what needs a script.

use std::time::Duration;

use redlatch::{Client, Error};
use testkit::RedisServer;

use super::{count, stats};
use crate::common;

const CYCLES: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_token_lock_cycle_is_two_plain_commands_where_the_server_has_them() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let lock = client.token_lock("token:cycle");
    // The first use asks the server what it has.
    lock.acquire().await.unwrap().release().await.unwrap();
    let native = lock.is_script_free();
    let before = stats(&mut admin).await;
    for _ in 0..CYCLES {
        lock.acquire().await.unwrap().release().await.unwrap();
    }
    let after = stats(&mut admin).await;
    let delta = |name: &str| count(&after, name) - count(&before, name);
    let scripts = delta("cmdstat_fcall") + delta("cmdstat_evalsha") + delta("cmdstat_eval");
    let releases = delta("cmdstat_delifeq") + delta("cmdstat_delex");
    eprintln!(
        "{} ({}): {CYCLES} cycles: SET {}, DELIFEQ/DELEX {releases}, scripts {scripts}",
        if native {
            "native"
        } else {
            "fallback: scripts"
        },
        client.capabilities().summary(),
        delta("cmdstat_set"),
    );
    // One INFO per stats() call comes on top.
    assert_eq!(delta("cmdstat_set"), CYCLES, "one SET per acquire");
    if native {
        assert_eq!(releases, CYCLES, "one DELIFEQ (or DELEX) per release");
        assert_eq!(scripts, 0, "no script on the script-free path");
    } else {
        assert_eq!(releases, 0);
        assert_eq!(scripts, CYCLES, "one release script per cycle");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_scripting_serves_the_token_lock_where_it_has_the_commands() {
    let server = RedisServer::builder()
        .arg("enable-module-command", "yes")
        .start()
        .unwrap();
    let mut admin = common::admin(&server).await;
    let unloaded = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("lua")
        .query_async::<redis::Value>(&mut admin)
        .await;
    if let Err(error) = unloaded {
        eprintln!(
            "skipped: this server's scripting cannot be unloaded ({error}): it has scripting"
        );
        return;
    }
    // Refused by default (every other lock runs as a script)...
    let refused = Client::connect(&server.url()).await;
    assert!(
        matches!(refused, Err(Error::ServerLacks { .. })),
        "{refused:?}"
    );
    // ...served when the token lock alone is asked for.
    let client = Client::builder(&server.url())
        .response_timeout(Duration::from_millis(500))
        .default_lease(Duration::from_millis(600))
        .token_lock_without_scripting(true)
        .connect()
        .await
        .expect("a server with DELIFEQ and SET IFEQ serves the token lock");
    let lock = client.token_lock("token:no-lua");
    assert!(
        lock.is_script_free(),
        "a server without Lua but with DELIFEQ and SET IFEQ is script-free"
    );
    let guard = lock.acquire().await.expect("served without scripts");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        guard.is_held(),
        "renewed by SET IFEQ: {:?}",
        guard.lost_reason()
    );
    guard.release().await.unwrap();
    let fenced = client
        .token_lock("token:no-lua")
        .fenced()
        .try_acquire()
        .await;
    assert!(
        matches!(
            fenced,
            Err(Error::ServerLacks {
                missing: "scripting",
                ..
            })
        ),
        "{fenced:?}"
    );
}

/// An ACL that confines the client to its key prefix still lets it learn
/// the server's commands: the questions name a key under the prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_confined_to_its_key_prefix_learns_the_servers_commands() {
    let server = RedisServer::builder()
        .arg("user", "app on >app-secret ~app:* &* +@all")
        .arg("user", "default on nopass ~* &* +@all")
        .start()
        .unwrap();
    let url = format!("redis://app:app-secret@127.0.0.1:{}", server.port());
    let client = Client::builder(&url)
        .response_timeout(Duration::from_millis(500))
        .key_prefix("app:")
        .connect()
        .await
        .unwrap();
    let open = common::client(&server).await;
    let lock = client.token_lock("confined");
    let native = open.token_lock("probe").is_script_free();
    eprintln!("this server is script-free for an open client: {native}");
    assert_eq!(
        lock.is_script_free(),
        native,
        "the confined client judged the server's commands otherwise"
    );
    lock.acquire().await.unwrap().release().await.unwrap();
}

/// On a server out of memory (`maxmemory` reached, `noeviction`) the token
/// lock answers as every primitive does (docs/SAFETY.md, "Redis out of
/// memory"): a busy one answers busy, never an OOM error; a held one stays
/// renewed by the watchdog and is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_lock_answers_busy_and_stays_renewed_when_the_server_is_out_of_memory() {
    let server = common::server();
    let mut admin = common::admin(&server).await;
    let client = common::client_with_lease(&server, Duration::from_millis(600)).await;
    let stranger = common::client(&server).await;
    let path = if client.token_lock("probe").is_script_free() {
        "native"
    } else {
        "scripts"
    };
    eprintln!(
        "token lock path: {path} ({})",
        client.capabilities().summary()
    );
    let busy = stranger
        .token_lock("token:oom-busy")
        .acquire()
        .await
        .unwrap();
    let held = client.token_lock("token:oom-held").acquire().await.unwrap();
    let set_maxmemory = |bytes: u64| {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .to_owned()
    };
    let () = set_maxmemory(1).query_async(&mut admin).await.unwrap();
    let tried = client.token_lock("token:oom-busy").try_acquire().await;
    let free = client.token_lock("token:oom-free").try_acquire().await;
    eprintln!(
        "under OOM: busy {:?}, free {:?}",
        tried.as_ref().map(Option::is_some),
        free.as_ref().map(Option::is_some)
    );
    // Several renewals of the 600 ms lease.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let still_held = held.is_held();
    let lost = held.lost_reason();
    let released = held.release().await;
    drop(free);
    let () = set_maxmemory(0).query_async(&mut admin).await.unwrap();
    busy.release().await.unwrap();
    let mut failures = Vec::new();
    if !matches!(tried, Ok(None)) {
        failures.push(format!("a busy token lock answered {tried:?}, not busy"));
    }
    if !still_held {
        failures.push(format!("a held token lock was not renewed: {lost:?}"));
    }
    if released.is_err() {
        failures.push(format!("a held token lock's release: {released:?}"));
    }
    assert!(failures.is_empty(), "{path}: {failures:#?}");
}

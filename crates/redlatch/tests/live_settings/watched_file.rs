//! A watched settings file (the `watch` feature): changes reach held
//! locks, bad files are refused, reads of an unchanged file are not
//! changes, and adjustments win over the file.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Error, Settings};

use crate::common;

fn write(path: &std::path::Path, text: &str) {
    // Write then rename, as editors do, so the watcher never reads half a file.
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

async fn pttl(admin: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    admin.pttl(key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_file_change_reaches_held_locks_and_bad_file_is_refused() {
    let server = common::server();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redlatch.toml");
    write(&path, "[lock]\ndefault_lease = \"1s\"\n");
    let client = common::client(&server).await;
    let watcher = client.watch_settings(&path).unwrap();
    assert_eq!(client.settings().default_lease, Duration::from_secs(1));
    let mut admin = common::admin(&server).await;
    let guard = client.lock("live").acquire().await.unwrap();
    assert!((1..=1000).contains(&pttl(&mut admin, "live").await));

    // A longer lease reaches the held lock at its next renewal.
    write(&path, "[lock]\ndefault_lease = \"3s\"\n");
    let raised = common::eventually(Duration::from_secs(3), || {
        let mut admin = admin.clone();
        async move { pttl(&mut admin, "live").await > 1500 }
    })
    .await;
    assert!(raised, "the held lock did not get the new 3 s lease");
    assert_eq!(client.settings().default_lease, Duration::from_secs(3));

    // A shorter one once the old lease has run down to it: a lease already
    // set is never shortened (docs/REDIS-DATA.md).
    write(&path, "[lock]\ndefault_lease = \"1s\"\n");
    let lowered = common::eventually(Duration::from_secs(6), || {
        let mut admin = admin.clone();
        async move { (1..=1000).contains(&pttl(&mut admin, "live").await) }
    })
    .await;
    assert!(
        lowered,
        "the held lock did not get down to the new 1 s lease"
    );
    assert_eq!(client.settings().default_lease, Duration::from_secs(1));
    assert!(watcher.reloads() >= 2);
    assert_eq!(watcher.last_error(), None);

    write(&path, "[lock]\ndefault_lease = \"banana\"\n");
    let refused = common::eventually(Duration::from_secs(3), || {
        let refused = watcher.last_error().is_some();
        async move { refused }
    })
    .await;
    assert!(refused, "the bad file was not reported");
    assert!(watcher.last_error().unwrap().contains("banana"));
    assert_eq!(
        client.settings().default_lease,
        Duration::from_secs(1),
        "old settings kept"
    );
    // Still renewed with the last good lease for longer than that lease.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let left = pttl(&mut admin, "live").await;
        assert!((1..=1000).contains(&left), "pttl {left}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(guard.is_held());
}

#[tokio::test]
async fn watching_a_bad_file_fails_at_once() {
    let server = common::server();
    let client = common::client(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    write(&path, "[lock]\nunknown_field = 1\n");
    assert!(matches!(
        client.watch_settings(&path),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        client.watch_settings(dir.path().join("missing.toml")),
        Err(Error::InvalidConfig(_))
    ));
    assert_eq!(client.settings(), {
        let mut expected = Settings::default();
        expected.connect_timeout = Duration::from_secs(2);
        expected.response_timeout = Duration::from_millis(500);
        expected.retry.base_delay = Duration::from_millis(20);
        expected
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_file_does_not_reload_it() {
    let server = common::server();
    let client = common::client(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiet.toml");
    write(&path, "[lock]\ndefault_lease = \"7s\"\n");
    let watcher = client.watch_settings(&path).unwrap();
    for _ in 0..5 {
        let _ = std::fs::read_to_string(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        watcher.reloads(),
        0,
        "reads of an unchanged file were taken for changes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adjusted_watch_keeps_a_value_over_the_file() {
    let server = common::server();
    let client = common::client(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adjusted.toml");
    write(
        &path,
        "[lock]\ndefault_lease = \"20s\"\nkey_prefix = \"a:\"\n",
    );
    let watcher = client
        .watch_settings_with(&path, |settings| {
            settings.default_lease = Duration::from_secs(4)
        })
        .unwrap();
    assert_eq!(client.settings().default_lease, Duration::from_secs(4));
    write(
        &path,
        "[lock]\ndefault_lease = \"9s\"\nkey_prefix = \"b:\"\n",
    );
    let applied = common::eventually(Duration::from_secs(3), || {
        let prefix = client.settings().key_prefix;
        async move { prefix == "b:" }
    })
    .await;
    assert!(applied, "the file's other fields apply");
    assert_eq!(client.settings().default_lease, Duration::from_secs(4));
    assert_eq!(watcher.reloads(), 1);
}

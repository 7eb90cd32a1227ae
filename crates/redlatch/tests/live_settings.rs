//! Settings changed while a client runs: from code and from a watched file.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::{Error, Settings};

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

#[tokio::test]
async fn new_key_prefix_applies_to_later_acquisitions() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let before = client.lock("job").acquire().await.unwrap();
    let mut settings = client.settings();
    settings.key_prefix = "v2:".into();
    client.update_settings(settings).unwrap();
    let after = client.lock("job").acquire().await.unwrap();
    assert_eq!(before.key(), "job");
    assert_eq!(after.key(), "v2:job");
    let both: (bool, bool) = (
        admin.exists("job").await.unwrap(),
        admin.exists("v2:job").await.unwrap(),
    );
    assert_eq!(both, (true, true));
}

/// A handle keeps the keys of its first acquire: a prefix changed while it
/// lives must still reach its later acquires, and a change back too.
#[tokio::test]
async fn a_kept_handle_follows_the_key_prefix_as_it_changes() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("kept");
    let mut keys = Vec::new();
    for prefix in ["", "v2:", "v3:", ""] {
        let mut settings = client.settings();
        settings.key_prefix = prefix.into();
        client.update_settings(settings).unwrap();
        let guard = lock.acquire().await.unwrap();
        keys.push(guard.key().to_owned());
        guard.release().await.unwrap();
    }
    assert_eq!(keys, ["kept", "v2:kept", "v3:kept", "kept"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_retries_through_a_short_pause_and_leaves_no_stray_hold() {
    let server = common::server();
    let client = redlatch::Client::builder(&server.url())
        .response_timeout(Duration::from_millis(150))
        .retries(8)
        .retry_delay(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    let admin = common::admin(&server).await;
    server.pause().unwrap();
    let resume = std::thread::spawn({
        let pid = server.pid().unwrap();
        move || {
            std::thread::sleep(Duration::from_millis(600));
            // SIGCONT from another thread: the test's server handle stays here.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    });
    let guard = client
        .lock("retried")
        .try_acquire()
        .await
        .expect("retries outlast the pause")
        .expect("free lock");
    resume.join().unwrap();
    server.resume().unwrap();
    guard.release().await.unwrap();
    // Attempts that timed out during the pause may have landed later: each
    // had its own owner and gave its hold back.
    let clean = common::eventually(Duration::from_secs(3), || {
        let mut admin = admin.clone();
        async move { !admin.exists::<_, bool>("retried").await.unwrap() }
    })
    .await;
    assert!(clean, "a timed-out attempt left a hold behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_timeout_is_read_at_each_call() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut settings = client.settings();
    settings.response_timeout = Duration::from_millis(100);
    settings.retry.attempts = 0;
    client.update_settings(settings).unwrap();
    server.pause().unwrap();
    let started = Instant::now();
    let outcome = client.lock("slow").try_acquire().await;
    let took = started.elapsed();
    server.resume().unwrap();
    assert!(
        matches!(outcome, Err(Error::ResponseTimeout { .. })),
        "{outcome:?}"
    );
    assert!(
        took < Duration::from_millis(450),
        "took {took:?} with a 100 ms timeout"
    );
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

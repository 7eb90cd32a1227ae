//! Settings changed while a client runs: from code and from a watched file.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

mod common;
#[cfg(feature = "watch")]
#[path = "live_settings/watched_file.rs"]
mod watched_file;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlatch::Error;

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

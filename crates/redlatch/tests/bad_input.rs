//! Bad input and unusable servers give typed errors, never panics.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

#[path = "bad_input/budget.rs"]
mod budget;
mod common;
#[path = "bad_input/names_and_durations.rs"]
mod names_and_durations;
#[path = "bad_input/scripts_raw.rs"]
mod scripts_raw;
#[path = "bad_input/settings_file.rs"]
mod settings_file;

use std::time::Duration;

use redis::AsyncCommands;
use redlatch::{Client, Error};

#[tokio::test]
async fn empty_and_oversized_names_are_invalid() {
    let server = common::server();
    let client = common::client(&server).await;
    assert!(matches!(
        client.lock("").acquire().await,
        Err(Error::InvalidName { .. })
    ));
    let huge = "n".repeat(redlatch::Settings::MAX_NAME_LEN + 1);
    assert!(matches!(
        client.lock(huge.as_str()).try_acquire().await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock(huge.as_str()).status().await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock("x").with_owner("").acquire().await,
        Err(Error::InvalidOwner { .. })
    ));
}

#[tokio::test]
async fn zero_and_absurd_durations_are_invalid() {
    let server = common::server();
    let client = common::client(&server).await;
    let lock = client.lock("durations");
    for lease in [
        Duration::ZERO,
        Duration::from_micros(10),
        Duration::MAX,
        redlatch::Settings::MAX_LEASE * 2,
    ] {
        assert!(
            matches!(
                lock.acquire_with_lease(lease).await,
                Err(Error::InvalidDuration { what: "lease", .. })
            ),
            "lease {lease:?} accepted"
        );
    }
    // A wait of Duration::MAX is "forever", not an overflow.
    let guard = lock.acquire_timeout(Duration::MAX).await.unwrap();
    // A zero wait is one attempt.
    assert!(matches!(
        lock.acquire_timeout(Duration::ZERO).await,
        Err(Error::Timeout { .. })
    ));
    drop(guard);
    let mut bad_settings = redlatch::Settings::default();
    bad_settings.default_lease = Duration::ZERO;
    assert!(matches!(
        client.update_settings(bad_settings),
        Err(Error::InvalidDuration { .. })
    ));
    assert_eq!(
        client.settings().default_lease,
        redlatch::Settings::DEFAULT_LEASE
    );
}

#[tokio::test]
async fn key_of_another_type_is_wrongtype() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let () = admin.set("not-a-lock", "some string").await.unwrap();
    let lock = client.lock("not-a-lock");
    assert!(matches!(lock.acquire().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        lock.try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(lock.status().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        lock.force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    let value: String = admin.get("not-a-lock").await.unwrap();
    assert_eq!(value, "some string", "the foreign key must be left alone");
}

#[tokio::test]
async fn unreachable_server_and_bad_url_are_typed_errors() {
    let mut server = common::server();
    let url = server.url();
    server.kill().unwrap();
    let refused = Client::builder(&url)
        .connect_timeout(Duration::from_millis(500))
        .retries(1)
        .retry_delay(Duration::from_millis(10))
        .connect()
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::Unavailable { .. }) | Err(Error::ConnectTimeout { .. })
        ),
        "{refused:?}"
    );
    assert!(matches!(
        Client::connect("not a url").await,
        Err(Error::InvalidConfig(_))
    ));
}

#[tokio::test]
async fn wrong_password_is_refused_and_url_credentials_work() {
    let server = testkit::RedisServer::builder()
        .acl_user("locker", "s3cret")
        .start()
        .unwrap();
    let good = Client::connect(&server.url())
        .await
        .expect("ACL user from the URL");
    let guard = good.lock("acl").acquire().await.unwrap();
    assert!(guard.token() >= 1);
    let bad_url = format!("redis://locker:wrong@127.0.0.1:{}", server.port());
    let refused = Client::builder(&bad_url).retries(0).connect().await;
    assert!(refused.is_err(), "a wrong password must not connect");
}

/// One try of `kind` ("lock", "fair", "write", "read") on `name`: whether it
/// took the lock (the guard is dropped at once).
async fn try_kind(client: &Client, kind: &str, name: &str) -> redlatch::Result<bool> {
    Ok(match kind {
        "lock" => client.lock(name).try_acquire().await?.is_some(),
        "fair" => client.fair_lock(name).try_acquire().await?.is_some(),
        "write" => client.read_write_lock(name).try_write().await?.is_some(),
        "read" => client.read_write_lock(name).try_read().await?.is_some(),
        other => unreachable!("no lock kind {other}"),
    })
}

/// An acquire refused for a corrupt fencing counter writes nothing: the
/// lock stays free, and once the counter is repaired anyone can take it.
#[tokio::test]
async fn acquire_with_a_corrupt_fencing_counter_fails_and_writes_nothing() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut wrong = Vec::new();
    for kind in ["lock", "fair", "write", "read"] {
        let name = format!("corrupt-{kind}");
        // The shared counter: a corrupt one fails every lock of the server.
        let counter = "redlatch_lock_token";
        let () = admin.set(counter, "not-a-number").await.unwrap();
        let outcome = try_kind(&client, kind, &name).await;
        if !matches!(outcome, Err(Error::WrongType { .. })) {
            wrong.push(format!("{kind}: {outcome:?} instead of WrongType"));
        }
        let pttl: i64 = admin.pttl(&name).await.unwrap();
        if pttl != -2 {
            wrong.push(format!(
                "{kind}: the failed acquire left the lock (PTTL {pttl} ms)"
            ));
        }
        let () = admin.set(counter, 5).await.unwrap();
        match try_kind(&other, kind, &name).await {
            Ok(true) => {}
            outcome => wrong.push(format!("{kind}: {outcome:?} once the counter was repaired")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

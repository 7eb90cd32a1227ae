//! Bad input and unusable servers give typed errors, never panics.

// With the library's `tls` feature on (a workspace build: the CLI asks for
// it), `cargo clippy` of this crate overflows rustc's default query depth
// (128) while laying out its futures; `cargo test` builds it either way.
#![recursion_limit = "256"]

#[path = "bad_input/budget.rs"]
mod budget;
mod common;
#[path = "bad_input/handle_names.rs"]
mod handle_names;
#[path = "bad_input/names_and_durations.rs"]
mod names_and_durations;
#[path = "bad_input/scripts_raw.rs"]
mod scripts_raw;
#[cfg(feature = "settings-file")]
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
                lock.clone().with_lease(lease).acquire().await,
                Err(Error::InvalidDuration { what: "lease", .. })
            ),
            "lease {lease:?} accepted"
        );
    }
    // A wait of Duration::MAX is "forever", not an overflow.
    let guard = lock.acquire_within(Some(Duration::MAX)).await.unwrap();
    // A zero wait is one attempt.
    assert!(matches!(
        lock.acquire_within(Some(Duration::ZERO)).await,
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

/// One acquire of `kind` on `name` by the named owner `owner`, the guard
/// kept (a second call re-enters the first's hold).
async fn acquire_named(
    client: &Client,
    kind: &str,
    name: &str,
    owner: &str,
) -> redlatch::Result<Option<Box<dyn std::any::Any + Send>>> {
    fn boxed<T: Send + 'static>(guard: Option<T>) -> Option<Box<dyn std::any::Any + Send>> {
        guard.map(|guard| Box::new(guard) as Box<dyn std::any::Any + Send>)
    }
    Ok(match kind {
        "lock" => boxed(client.lock(name).with_owner(owner).try_acquire().await?),
        "fair" => boxed(
            client
                .fair_lock(name)
                .with_owner(owner)
                .try_acquire()
                .await?,
        ),
        "write" => boxed(
            client
                .read_write_lock(name)
                .with_owner(owner)
                .try_write()
                .await?,
        ),
        "read" => boxed(
            client
                .read_write_lock(name)
                .with_owner(owner)
                .try_read()
                .await?,
        ),
        other => unreachable!("no lock kind {other}"),
    })
}

/// A re-entry whose hold's kept token is not a number (the lock hash's
/// `redlatch_token` field; for a read hold, the value of its first timeout
/// key) is refused with `WrongType` and writes nothing: the hold count stays
/// at the outer hold's, which its guard gives back. Failed before for fair,
/// write and read: the hold count was raised first, then the reply (no
/// token) could not be read, leaving a hold no guard would give back.
#[tokio::test]
async fn a_reentry_whose_kept_token_is_corrupt_fails_and_writes_nothing() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut wrong = Vec::new();
    for kind in ["lock", "fair", "write", "read"] {
        let name = format!("kept-{kind}");
        let outer = acquire_named(&client, kind, &name, "job").await.unwrap();
        assert!(outer.is_some(), "{kind}: the outer hold");
        let field = match kind {
            "write" => format!("{}:job:write", client.id()),
            _ => format!("{}:job", client.id()),
        };
        if kind == "read" {
            let first = format!("{{{name}}}:{}:job:rwlock_timeout:1", client.id());
            let ttl: i64 = admin.pttl(&first).await.unwrap();
            assert!(ttl > 0, "read: the first timeout key {first} ({ttl})");
            let () = redis::cmd("SET")
                .arg(&first)
                .arg("not-a-number")
                .arg("KEEPTTL")
                .query_async(&mut admin)
                .await
                .unwrap();
        } else {
            let () = admin
                .hset(&name, "redlatch_token", "not-a-number")
                .await
                .unwrap();
        }
        let again = acquire_named(&client, kind, &name, "job").await;
        if !matches!(again, Err(Error::WrongType { .. })) {
            wrong.push(format!(
                "{kind}: {:?} instead of WrongType",
                again.as_ref().map(|guard| guard.is_some())
            ));
        }
        drop(again);
        let count: Option<String> = admin.hget(&name, &field).await.unwrap();
        if count.as_deref() != Some("1") {
            wrong.push(format!(
                "{kind}: hold count {count:?} after the refused re-entry"
            ));
        }
        drop(outer);
        let freed = common::eventually(Duration::from_secs(5), || {
            let mut admin = admin.clone();
            let name = name.clone();
            async move { !admin.exists::<_, bool>(&name).await.unwrap() }
        })
        .await;
        if !freed {
            wrong.push(format!(
                "{kind}: the outer guard's release did not free the lock"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every value of the shared counter a token cannot come from fails every
/// lock of the server with `WrongType` and writes nothing: not an integer,
/// negative, another type, at the 64-bit maximum, and at or above 2^53 - 1,
/// whose next token would not be exact in a script's numbers (Lua's
/// doubles: 2^53 + 1 reads as 2^53, and two acquisitions could answer one
/// token). Failed before for those: the locks were taken, with inexact tokens.
#[tokio::test]
async fn a_shared_counter_no_exact_token_comes_from_fails_every_lock() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let counter = "redlatch_lock_token";
    let mut wrong = Vec::new();
    for value in [
        "not-a-number",
        "-3",
        "1.5",
        "9223372036854775807",
        "9007199254740991",
        "9007199254740992",
        "18014398509481984",
        "hash",
    ] {
        for kind in ["lock", "fair", "write", "read"] {
            let name = format!("shared-{kind}");
            let _: () = admin.del(counter).await.unwrap();
            if value == "hash" {
                let () = admin.hset(counter, "f", "1").await.unwrap();
            } else {
                let () = admin.set(counter, value).await.unwrap();
            }
            let outcome = try_kind(&client, kind, &name).await;
            if !matches!(outcome, Err(Error::WrongType { .. })) {
                wrong.push(format!("{value} {kind}: {outcome:?} instead of WrongType"));
            }
            let exists: bool = admin.exists(&name).await.unwrap();
            if exists {
                wrong.push(format!("{value} {kind}: the failed acquire left the lock"));
                let _: () = admin.del(&name).await.unwrap();
            }
        }
    }
    // The last exact token is still handed out, once.
    let () = admin.set(counter, "9007199254740990").await.unwrap();
    let guard = client.lock("shared-last").try_acquire().await.unwrap();
    assert_eq!(guard.map(|guard| guard.token()), Some((1 << 53) - 1));
    assert!(wrong.is_empty(), "{wrong:#?}");
}

//! `Client::handle::<P>(name)` and the named factory (`client.semaphore(name)`,
//! ...) make the same primitive: the same keys under the same prefix, and
//! the same name rules, for names a caller may pass by mistake.

use std::time::Duration;

use redis::AsyncCommands;
use redlatch::{
    Client, CountDownLatch, Error, FairLock, PermitSemaphore, ReadWriteLock, Semaphore, TokenLock,
};

use crate::common;

/// What one side did, or the kind of error it met.
#[derive(Debug, PartialEq)]
enum Seen {
    Done(bool),
    InvalidName,
    Other(String),
}

fn seen<T>(outcome: redlatch::Result<T>, done: impl FnOnce(&T) -> bool) -> (Seen, Option<T>) {
    match outcome {
        Ok(value) => (Seen::Done(done(&value)), Some(value)),
        Err(Error::InvalidName { .. }) => (Seen::InvalidName, None),
        Err(other) => (Seen::Other(format!("{other:?}")), None),
    }
}

/// Takes or sets `name` of `kind` on `first` (by `handle::<P>` when
/// `by_handle`, else by the factory), then asks `second` by the other way:
/// what each saw. The first side's hold is kept until both have answered.
async fn take_then_ask(
    kind: &str,
    first: &Client,
    second: &Client,
    name: &str,
    by_handle: bool,
) -> (Seen, Seen) {
    macro_rules! pick {
        ($client:expr, $by_handle:expr, $p:ty, $factory:ident) => {
            if $by_handle {
                $client.handle::<$p>(name)
            } else {
                $client.$factory(name)
            }
        };
    }
    match kind {
        "fair" => {
            let (a, _held) = seen(
                pick!(first, by_handle, FairLock, fair_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, FairLock, fair_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            (a, b)
        }
        "token" => {
            let (a, _held) = seen(
                pick!(first, by_handle, TokenLock, token_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, TokenLock, token_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            (a, b)
        }
        "read-write" => {
            let (a, _held) = seen(
                pick!(first, by_handle, ReadWriteLock, read_write_lock)
                    .try_write()
                    .await,
                Option::is_some,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, ReadWriteLock, read_write_lock)
                    .try_read()
                    .await,
                Option::is_some,
            );
            (a, b)
        }
        "semaphore" => {
            let (a, _) = seen(
                pick!(first, by_handle, Semaphore, semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, Semaphore, semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            );
            (a, b)
        }
        "permit" => {
            let (a, _) = seen(
                pick!(first, by_handle, PermitSemaphore, permit_semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, PermitSemaphore, permit_semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            );
            (a, b)
        }
        "latch" => {
            let (a, _) = seen(
                pick!(first, by_handle, CountDownLatch, count_down_latch)
                    .try_set_count(1)
                    .await,
                |set| *set,
            );
            let (b, _) = seen(
                pick!(second, !by_handle, CountDownLatch, count_down_latch)
                    .try_set_count(1)
                    .await,
                |set| *set,
            );
            (a, b)
        }
        other => unreachable!("{other}"),
    }
}

const KINDS: [&str; 6] = [
    "fair",
    "token",
    "read-write",
    "semaphore",
    "permit",
    "latch",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primitive_by_handle_is_the_named_factorys_for_every_kind_of_name() {
    let server = common::server();
    let connect = || async {
        Client::builder(&server.url())
            .key_prefix("app:")
            .response_timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap()
    };
    let (first, second) = (connect().await, connect().await);
    let mut admin = common::admin(&server).await;
    let longest = "n".repeat(redlatch::Settings::MAX_NAME_LEN - "app:".len());
    let valid: Vec<String> = [
        "plain",
        "a:b:c",
        "{tag}x",
        "x{tag}",
        "{}",
        "}{",
        "é\u{0}\u{1}\u{fffd}\u{7f}",
        " ",
        longest.as_str(),
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    for (n, name) in valid.iter().enumerate() {
        for kind in KINDS {
            for by_handle in [true, false] {
                // Each pair on names of its own: "<kind>/<way>/<n>/<name>".
                let full = format!("{kind}/{by_handle}/{n}/{name}");
                let full = &full[..full.len().min(redlatch::Settings::MAX_NAME_LEN - 4)];
                let (a, b) = take_then_ask(kind, &first, &second, full, by_handle).await;
                assert_eq!(
                    (a, b),
                    (Seen::Done(true), Seen::Done(false)),
                    "{kind}, first by handle: {by_handle}, name {n}"
                );
            }
        }
    }
    for name in [String::new(), "n".repeat(1 << 20), longest.clone() + "n"] {
        for kind in KINDS {
            for by_handle in [true, false] {
                let (a, b) = take_then_ask(kind, &first, &second, &name, by_handle).await;
                assert_eq!(
                    (a, b),
                    (Seen::InvalidName, Seen::InvalidName),
                    "{kind}, name of {} bytes",
                    name.len()
                );
            }
        }
    }
    // Everything written is under the prefix (Redisson's `prefix{app:...}`
    // layout for the keys beside a lock), but the one fencing counter every
    // lock of the server shares (docs/REDIS-DATA.md).
    let keys: Vec<Vec<u8>> = admin.keys("*").await.unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        let key = String::from_utf8_lossy(&key);
        assert!(
            key == "redlatch_lock_token"
                || key.starts_with("app:")
                || key.contains("{app:")
                || key.contains(":app:"),
            "{key}"
        );
    }
}

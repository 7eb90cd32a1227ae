//! On a cluster, `Client::handle::<P>(name)` takes and refuses the names
//! the named factory does (braces that would split a primitive's keys over
//! two slots), and the two reach the same keys.

use std::time::Duration;

use redlatch::{Client, CountDownLatch, Error, FairLock, Semaphore, TokenLock};

/// What a first call did: `Some(true)` took or set, `Some(false)` found it
/// taken or set, `None` refused the name; anything else fails the test.
fn class<T>(
    what: &str,
    outcome: redlatch::Result<T>,
    done: impl FnOnce(&T) -> bool,
) -> Option<bool> {
    match outcome {
        Ok(value) => Some(done(&value)),
        Err(Error::InvalidName { .. }) => None,
        Err(other) => panic!("{what}: {other:?}"),
    }
}

/// The first call by `first` (the handle when `by_handle`), the second by
/// `second` the other way, on `name` of `kind`.
async fn both_ways(
    kind: &str,
    first: &Client,
    second: &Client,
    name: &str,
    by_handle: bool,
) -> (Option<bool>, Option<bool>) {
    macro_rules! by {
        ($client:expr, $handle:expr, $p:ty, $factory:ident) => {
            if $handle {
                $client.handle::<$p>(name)
            } else {
                $client.$factory(name)
            }
        };
    }
    match kind {
        "semaphore" => (
            class(
                kind,
                by!(first, by_handle, Semaphore, semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            ),
            class(
                kind,
                by!(second, !by_handle, Semaphore, semaphore)
                    .try_set_permits(1)
                    .await,
                |set| *set,
            ),
        ),
        "latch" => (
            class(
                kind,
                by!(first, by_handle, CountDownLatch, count_down_latch)
                    .try_set_count(1)
                    .await,
                |set| *set,
            ),
            class(
                kind,
                by!(second, !by_handle, CountDownLatch, count_down_latch)
                    .try_set_count(1)
                    .await,
                |set| *set,
            ),
        ),
        "fair" => {
            let held = by!(first, by_handle, FairLock, fair_lock)
                .try_acquire()
                .await;
            let taken = class(
                kind,
                by!(second, !by_handle, FairLock, fair_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            (class(kind, held, Option::is_some), taken)
        }
        "token" => {
            let held = by!(first, by_handle, TokenLock, token_lock)
                .try_acquire()
                .await;
            let taken = class(
                kind,
                by!(second, !by_handle, TokenLock, token_lock)
                    .try_acquire()
                    .await,
                Option::is_some,
            );
            (class(kind, held, Option::is_some), taken)
        }
        other => unreachable!("{other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primitive_by_handle_takes_and_refuses_the_names_its_factory_does() {
    let cluster = super::cluster();
    let first = super::client(&cluster, Duration::from_secs(30)).await;
    let second = super::client(&cluster, Duration::from_secs(30)).await;
    let mut seen = Vec::new();
    for kind in ["semaphore", "latch", "fair", "token"] {
        for (n, name) in [
            "plain", "{tag}", "a{tag}b", "{a}{b}", "{}x", "x{", "}", "a:b:c",
        ]
        .iter()
        .enumerate()
        {
            let mut ways = Vec::new();
            for by_handle in [true, false] {
                let full = format!("{name}-{kind}-{n}-{by_handle}");
                let outcome = both_ways(kind, &first, &second, &full, by_handle).await;
                assert!(
                    matches!(outcome, (Some(true), Some(false)) | (None, None)),
                    "{kind} {full:?}, first by handle: {by_handle}: {outcome:?}"
                );
                ways.push(outcome.0.is_some());
            }
            assert_eq!(ways[0], ways[1], "{kind} {name:?}: taken one way only");
            seen.push((kind, *name, ways[0]));
        }
    }
    // Both outcomes met: some names taken, some refused.
    assert!(
        seen.iter().any(|(_, _, taken)| *taken) && seen.iter().any(|(_, _, taken)| !*taken),
        "{seen:?}"
    );
}

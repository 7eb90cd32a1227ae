//! Helpers the deadlock tests share (`deadlock.rs`, `deadlock_red.rs`):
//! reading the wait-for edges a server holds, waiting for them to come
//! and go, and the cycle through a read-write lock that several tests
//! close behind different crowds.

use std::time::Duration;

use redlatch::{Client, Error};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common;

/// Long enough that no test ends by it unless something hangs.
pub const LONG: Duration = Duration::from_secs(10);

/// The wait-for edges in the server now.
pub async fn edges(admin: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("*{}*", redlatch::deadlock::WAIT_KEY_PREFIX))
        .query_async(admin)
        .await
        .expect("KEYS")
}

/// Waits until at least `n` wait-for edges stand.
pub async fn until_edges(admin: &redis::aio::MultiplexedConnection, n: usize) {
    let conn = admin.clone();
    let written = common::eventually(LONG, move || {
        let mut conn = conn.clone();
        async move { edges(&mut conn).await.len() >= n }
    })
    .await;
    assert!(written, "fewer than {n} wait-for edges were written");
}

/// Waits until no wait-for edge is left; false if one stays `limit`.
pub async fn until_no_edge(admin: &redis::aio::MultiplexedConnection, limit: Duration) -> bool {
    let conn = admin.clone();
    common::eventually(limit, move || {
        let mut conn = conn.clone();
        async move { edges(&mut conn).await.is_empty() }
    })
    .await
}

/// A client on `url` with deadlock detection on, under key prefix
/// `prefix`, with the test timeouts.
pub async fn detecting_under(url: &str, prefix: &str) -> Client {
    Client::builder(url)
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_millis(500))
        .key_prefix(prefix)
        .deadlock_detection(true)
        .connect()
        .await
        .expect("connect to the test server")
}

/// A short description of an acquire's outcome.
pub fn said<T>(outcome: &Result<T, Error>) -> String {
    match outcome {
        Ok(_) => "acquired".to_owned(),
        Err(error) => error.to_string(),
    }
}

/// True when the outcome is the refusal of a deadlock.
pub fn is_deadlock<T>(outcome: &Result<T, Error>) -> bool {
    matches!(outcome, Err(Error::Deadlock { .. }))
}

/// The cycle A → `lock` → B → `rw` → A, closed by B: B (on `writer`)
/// holds `lock`, then asks to write `rw` within `write_within`; A (on
/// `reader`) reads `rw`, then waits for `lock`. B asks only once A's edge
/// stands, and at least `edges_first` edges are up (A's and any the test
/// left). Returns B's outcome and A's task, which ends once B gives
/// `lock` back.
pub async fn writer_closes_a_cycle_through_a_reader(
    reader: Client,
    writer: Client,
    (lock, rw): (&'static str, &'static str),
    write_within: Duration,
    admin: &redis::aio::MultiplexedConnection,
    edges_first: usize,
) -> (Result<(), Error>, JoinHandle<Result<(), Error>>) {
    let (b_holds, held) = oneshot::channel();
    let (go, writing) = oneshot::channel::<()>();
    let b = tokio::spawn(async move {
        let first = writer.lock(lock).acquire().await.unwrap();
        b_holds.send(()).unwrap();
        writing.await.unwrap();
        let outcome = writer
            .read_write_lock(rw)
            .write_within(Some(write_within))
            .await
            .map(drop);
        drop(first);
        outcome
    });
    held.await.unwrap();
    let a = tokio::spawn(async move {
        let read = reader.read_write_lock(rw).read().await.unwrap();
        let outcome = reader.lock(lock).acquire_within(Some(LONG)).await.map(drop);
        drop(read);
        outcome
    });
    until_edges(admin, edges_first).await;
    go.send(()).unwrap();
    (b.await.unwrap(), a)
}

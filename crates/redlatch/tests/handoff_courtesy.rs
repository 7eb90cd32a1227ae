//! Turn taking between processes: a client that just released a lock to
//! waiters elsewhere steps aside briefly instead of taking it straight back.
//! Its own test binary: it measures scheduling-sensitive turn counts, so it
//! should not share the machine with the heavy contention tests.

mod common;

use std::sync::Arc;
use std::time::Duration;

/// Two clients each loop acquire → release on one lock with no pause, the
/// case where a releaser barges; returns how many of the hand-offs went to
/// the other client.
async fn turns_taken(server: &testkit::RedisServer, lock_name: &str, grace: Duration) -> usize {
    const ROUNDS: usize = 100;
    let holders = Arc::new(holder_log::Log::default());
    let mut tasks = Vec::new();
    for id in 0..2 {
        let client = common::client(server).await;
        let mut settings = client.settings();
        settings.handoff_grace = grace;
        client.update_settings(settings).unwrap();
        let holders = holders.clone();
        let lock_name = lock_name.to_owned();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock(lock_name);
            for _ in 0..ROUNDS {
                let guard = lock.acquire().await.expect("acquire");
                holders.push(id);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let order = holders.take();
    assert_eq!(order.len(), 2 * ROUNDS);
    order.windows(2).filter(|pair| pair[0] != pair[1]).count()
}

/// `HANDOFF_GRACE` scaled for an unoptimised build and a loaded machine:
/// the courtesy ends once the lock has stayed free for a tenth of it, so
/// this gives the woken waiter of the other client 5 ms to take the lock.
/// At 20 ms (a 2 ms window) a CI run on an idle machine saw 141 of 199,
/// and 331205c measured 145..160 here the same day: the window, not the
/// courtesy, decided.
const TEST_BUILD_GRACE: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_client_steps_aside_for_waiters_of_other_clients() {
    let server = common::server();
    // Control, in the same conditions: the releaser may take the lock straight back.
    let barging = turns_taken(&server, "turns-barging", Duration::ZERO).await;
    // The courtesy ends once the lock has stayed free for a tenth of the
    // grace; a test build hands off several times slower than a release
    // build, so it gets a grace of that many more hand-offs.
    let courteous = turns_taken(&server, "turns-courteous", TEST_BUILD_GRACE).await;
    // Strict alternation is 199. Measured here (2026-11-27): 169..195 with
    // the courtesy on Redis 7.0, 177..193 on Valkey 8.0 and 8.1; without it
    // 102..178 — the control is printed, not compared: on a busy
    // machine the barging run alternates well now and then by chance (a CI
    // run saw 178 against 170), so only the courtesy's own floor is judged.
    eprintln!("hand-offs to the other client: {courteous} with the courtesy, {barging} without");
    assert!(
        courteous >= 150,
        "{courteous} of 199 hand-offs went to the other client with the courtesy ({barging} without)"
    );
}

/// A tiny append-only log shared by tasks.
mod holder_log {
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct Log(Mutex<Vec<usize>>);

    impl Log {
        pub fn push(&self, id: usize) {
            self.0.lock().unwrap().push(id);
        }

        pub fn take(&self) -> Vec<usize> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }
}

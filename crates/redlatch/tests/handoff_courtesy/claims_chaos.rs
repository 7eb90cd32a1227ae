//! Chaos for long waiters' claims: workers lock and release one lock in a
//! loop while claimants misbehave at random: polled only now and then,
//! cancelled mid-attempt, giving up, dropped from an aborted task, or in a
//! child process stopped (SIGSTOP) and resumed. It checks what the claim
//! promises (docs/SAFETY.md, invariant (g)): a free lock is refused to
//! everyone for at most one short interval per claimant attempt, and every
//! waiter is served in the end.
//!
//! Seeded (`REDLATCH_TEST_SEED`, printed); runs
//! `REDLATCH_CLAIMS_CHAOS_SECS` seconds (15 by default, the CI budget).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;

const LOCK: &str = "chaos-claimed";
const CHILD_URL: &str = "REDLATCH_TEST_CLAIMANT_URL";
const TEST_NAME: &str =
    "claims_chaos::a_free_lock_is_refused_at_most_briefly_and_every_waiter_is_served";

/// A free lock's refusal lasts the claim's come-now window (200 ms) past
/// the first refusal; the rest is a loaded machine's slack. A claim that
/// stood until it lapsed gave gaps of about a second.
const REFUSED_AT_MOST: Duration = Duration::from_millis(600);

/// A waiter that is polled again (a claimant) or resumed (the child) gets
/// the lock within this.
const SERVED_WITHIN: Duration = Duration::from_secs(10);

fn run_time() -> Duration {
    let secs = std::env::var("REDLATCH_CLAIMS_CHAOS_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(15);
    Duration::from_secs(secs)
}

/// One worker hold: its fencing token and when it was asked for, taken and
/// given back.
#[derive(Clone, Copy)]
struct WorkerHold {
    token: u64,
    asked: Instant,
    got: Instant,
    released: Instant,
}

/// A random generator for one actor, seeded from the test's.
fn fork(rng: &mut common::Rng) -> common::Rng {
    common::Rng::new(rng.below(u64::MAX))
}

fn between(rng: &mut common::Rng, low_ms: u64, high_ms: u64) -> Duration {
    Duration::from_millis(low_ms + rng.below(high_ms - low_ms + 1))
}

/// In the child process: a claimant that waits, holds briefly, reports each
/// hold's token on stdout, and waits again, until killed. Its lease is
/// short, so a hold it keeps while stopped frees the lock within a second.
fn claim_until_killed(url: String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let client = common::client_at(&url, Duration::from_secs(1)).await;
        println!("CONNECTED");
        let lock = client.lock(LOCK);
        loop {
            let guard = lock.acquire().await.expect("child acquire");
            println!("HELD {}", guard.token());
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = guard.release().await;
        }
    });
}

/// The child claimant process, killed when dropped.
struct ChildClaimant {
    child: Child,
    /// When each of its holds was reported.
    held: Arc<Mutex<Vec<Instant>>>,
}

impl ChildClaimant {
    fn start(url: &str) -> ChildClaimant {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_URL, url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("CONNECTED") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the child exited");
        }
        let held = Arc::new(Mutex::new(Vec::new()));
        let log = held.clone();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if line.starts_with("HELD") {
                    log.lock().unwrap().push(Instant::now());
                }
            }
        });
        ChildClaimant { child, held }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    fn holds_since(&self, since: Instant) -> usize {
        self.held
            .lock()
            .unwrap()
            .iter()
            .filter(|at| **at >= since)
            .count()
    }
}

impl Drop for ChildClaimant {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker: acquire, hold 5..40 ms, release, until `stop`.
async fn work(
    client: redlatch::Client,
    mut rng: common::Rng,
    stop: Arc<AtomicBool>,
) -> Vec<WorkerHold> {
    let lock = client.lock(LOCK);
    let mut holds = Vec::new();
    while !stop.load(SeqCst) {
        let asked = Instant::now();
        let guard = lock.acquire().await.expect("worker acquire");
        let (token, got) = (guard.token(), Instant::now());
        tokio::time::sleep(between(&mut rng, 5, 40)).await;
        guard.release().await.expect("worker release");
        holds.push(WorkerHold {
            token,
            asked,
            got,
            released: Instant::now(),
        });
    }
    holds
}

/// What a claimant did, by kind of misbehaviour.
#[derive(Default, Debug)]
struct Misbehaved {
    rarely_polled: u32,
    cancelled: u32,
    gave_up: u32,
    aborted: u32,
    served: u32,
}

/// A claimant that misbehaves at random until `stop`, then waits once
/// more, polled all along: it must be served.
async fn misbehave(
    client: redlatch::Client,
    mut rng: common::Rng,
    stop: Arc<AtomicBool>,
) -> Misbehaved {
    let lock = client.lock(LOCK);
    let mut did = Misbehaved::default();
    while !stop.load(SeqCst) {
        match rng.below(4) {
            0 => {
                // Polled briefly now and then; dropped after a few polls.
                did.rarely_polled += 1;
                let acquiring = lock.acquire();
                tokio::pin!(acquiring);
                for _ in 0..1 + rng.below(5) {
                    let poll = between(&mut rng, 2, 30);
                    if let Ok(guard) = tokio::time::timeout(poll, &mut acquiring).await {
                        guard.expect("claimant acquire").release().await.unwrap();
                        did.served += 1;
                        break;
                    }
                    tokio::time::sleep(between(&mut rng, 200, 1_500)).await;
                }
            }
            1 => {
                // Dropped at a random moment: often with an attempt in flight.
                did.cancelled += 1;
                let wait = between(&mut rng, 250, 900);
                if let Ok(guard) = tokio::time::timeout(wait, lock.acquire()).await {
                    guard.expect("claimant acquire").release().await.unwrap();
                    did.served += 1;
                }
            }
            2 => {
                // Gives up: withdraws its claim.
                did.gave_up += 1;
                let wait = between(&mut rng, 250, 900);
                match lock.acquire_within(Some(wait)).await {
                    Ok(guard) => {
                        guard.release().await.unwrap();
                        did.served += 1;
                    }
                    Err(redlatch::Error::Timeout { .. }) => {}
                    Err(other) => panic!("claimant acquire: {other}"),
                }
            }
            _ => {
                // Its task aborted: the future is dropped wherever it was.
                did.aborted += 1;
                let lock = lock.clone();
                let task = tokio::spawn(async move {
                    let guard = lock.acquire().await.expect("claimant acquire");
                    guard.release().await.unwrap();
                });
                tokio::time::sleep(between(&mut rng, 250, 900)).await;
                if task.is_finished() {
                    did.served += 1;
                }
                task.abort();
            }
        }
        tokio::time::sleep(between(&mut rng, 0, 50)).await;
    }
    let last = tokio::time::timeout(SERVED_WITHIN, lock.acquire())
        .await
        .expect("a claimant polled all along was not served")
        .expect("claimant acquire");
    last.release().await.unwrap();
    did
}

/// How long the lock stayed free before each worker took it after another
/// worker's hold (consecutive tokens: nobody held it between) while that
/// worker was asking: the time a free lock refused it.
fn refused_gaps(holds: &mut [WorkerHold]) -> Vec<Duration> {
    holds.sort_by_key(|hold| hold.token);
    holds
        .windows(2)
        .filter(|pair| pair[1].token == pair[0].token + 1)
        .map(|pair| {
            let free_and_asked = pair[0].released.max(pair[1].asked);
            pair[1].got.saturating_duration_since(free_and_asked)
        })
        .collect()
}

#[test]
fn a_free_lock_is_refused_at_most_briefly_and_every_waiter_is_served() {
    if let Ok(url) = std::env::var(CHILD_URL) {
        return claim_until_killed(url);
    }
    let _measuring = crate::MEASURING.blocking_lock();
    let run = run_time();
    let mut rng = common::Rng::from_env();
    let server = common::server();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..2 {
            let client = common::client(&server).await;
            workers.push(tokio::spawn(work(client, fork(&mut rng), stop.clone())));
        }
        let mut claimants = Vec::new();
        for _ in 0..3 {
            let client = common::client(&server).await;
            claimants.push(tokio::spawn(misbehave(
                client,
                fork(&mut rng),
                stop.clone(),
            )));
        }
        let child = ChildClaimant::start(&server.url());
        let (mut stops, started) = (0u32, Instant::now());
        while started.elapsed() < run {
            tokio::time::sleep(between(&mut rng, 100, 1_000)).await;
            child.signal("-STOP");
            stops += 1;
            tokio::time::sleep(between(&mut rng, 100, 1_500)).await;
            child.signal("-CONT");
        }
        stop.store(true, SeqCst);
        let resumed = Instant::now();

        let mut holds = Vec::new();
        for worker in workers {
            holds.extend(worker.await.unwrap());
        }
        let mut misbehaved = Vec::new();
        for claimant in claimants {
            misbehaved.push(claimant.await.unwrap());
        }
        // The child, resumed for good, is served too.
        let deadline = Instant::now() + SERVED_WITHIN;
        while child.holds_since(resumed) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let child_holds = child.held.lock().unwrap().len();
        let worker_holds = holds.len();
        let mut gaps = refused_gaps(&mut holds);
        gaps.sort();
        let at = |q: f64| gaps[((gaps.len() - 1) as f64 * q) as usize];
        eprintln!(
            "{run:?}: {worker_holds} worker holds, {} hand-overs between workers \
             (free and asked for: median {:?}, p99 {:?}, max {:?}); claimants {misbehaved:?}; \
             the child held {child_holds} times, stopped {stops} times",
            gaps.len(),
            at(0.5),
            at(0.99),
            at(1.0),
        );
        assert!(
            child.holds_since(resumed) > 0,
            "the resumed child claimant was not served within {SERVED_WITHIN:?}"
        );
        assert!(
            at(1.0) <= REFUSED_AT_MOST,
            "a free lock was refused to a worker for {:?}",
            at(1.0)
        );
    });
}

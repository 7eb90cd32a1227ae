//! The permit-expirable semaphore: permits kept alive by a live holder,
//! reclaimed after a dead one, Redisson's layout.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

/// Set in the child process that holds a permit until it is killed.
/// A permit id (32 hex digits) as the expiries set stores it: 16 raw bytes.
fn raw_id(id: &str) -> Vec<u8> {
    uuid::Uuid::try_parse(id).unwrap().as_bytes().to_vec()
}

const HOLDER_URL: &str = "REDLATCH_TEST_PERMIT_HOLDER_URL";
const HOLDER_LEASE: Duration = Duration::from_millis(600);

/// Not a test of its own: the holder process that
/// `expirable_permit_returns_after_its_holder_process_is_killed` starts and kills.
#[tokio::test]
#[ignore = "run as a child process by expirable_permit_returns_after_its_holder_process_is_killed"]
async fn holder_process() {
    let Ok(url) = std::env::var(HOLDER_URL) else {
        return;
    };
    let client = redlatch::Client::builder(&url)
        .default_lease(HOLDER_LEASE)
        .connect()
        .await
        .unwrap();
    let permit = client.permit_semaphore("jobs").acquire().await.unwrap();
    println!("HELD {}", permit.id());
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(permit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_permit_returns_after_its_holder_process_is_killed() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let jobs = client.permit_semaphore("jobs");
    assert!(jobs.try_set_permits(1).await.unwrap());

    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "holder_process", "--nocapture"])
        .env(HOLDER_URL, server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder process");
    let stdout = holder.stdout.take().unwrap();
    let id = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("HELD ").map(str::to_owned))
    })
    .await
    .unwrap()
    .expect("the holder took the permit");

    // Alive, the holder keeps its permit over several leases.
    tokio::time::sleep(HOLDER_LEASE * 4).await;
    assert_eq!(
        jobs.available_permits().await.unwrap(),
        0,
        "a live holder's permit came back"
    );
    let expiry: Option<f64> = admin.zscore("{jobs}:timeout", raw_id(&id)).await.unwrap();
    assert!(
        expiry.is_some(),
        "the live holder's permit left the expiries set"
    );
    assert!(jobs.try_acquire().await.unwrap().is_none());

    holder.kill().expect("kill -9 the holder");
    holder.wait().unwrap();
    let killed_at = Instant::now();
    let permit = jobs
        .acquire_within(Some(Duration::from_secs(20)))
        .await
        .expect("the dead holder's permit came back");
    assert!(permit.is_held());
    let expiry: Option<f64> = admin.zscore("{jobs}:timeout", raw_id(&id)).await.unwrap();
    assert_eq!(expiry, None, "the dead holder's permit id was reclaimed");
    assert!(
        killed_at.elapsed() < Duration::from_secs(20),
        "took {:?}",
        killed_at.elapsed()
    );
    eprintln!(
        "permit back {:?} after kill -9 (lease {HOLDER_LEASE:?})",
        killed_at.elapsed()
    );
}

#[tokio::test]
async fn cancelled_waiter_leaves_no_permit_or_id_behind() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let slots = client.permit_semaphore("cancel");
    slots.try_set_permits(1).await.unwrap();
    let permit = slots.acquire().await.unwrap();
    let waiting = tokio::spawn({
        let slots = slots.clone();
        async move { slots.acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    permit.release().await.unwrap();
    assert_eq!(slots.available_permits().await.unwrap(), 1);
    let held: i64 = admin.zcard("{cancel}:timeout").await.unwrap();
    assert_eq!(held, 0, "a cancelled waiter left a permit id behind");
}

#[tokio::test]
async fn renewed_permit_outlives_many_leases_and_release_returns_it() {
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let other = common::client(&server).await;
    let slots = client.permit_semaphore("slots");
    slots.try_set_permits(1).await.unwrap();
    let permit = slots.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(permit.is_held(), "{:?}", permit.lost_reason());
    assert!(
        other
            .permit_semaphore("slots")
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    permit.release().await.unwrap();
    assert_eq!(slots.available_permits().await.unwrap(), 1);
}

#[tokio::test]
async fn fixed_lease_permit_runs_out_and_its_guard_learns_it() {
    let server = common::server();
    let client = common::client(&server).await;
    let other = common::client(&server).await;
    let slots = client.permit_semaphore("short");
    slots.try_set_permits(1).await.unwrap();
    let permit = slots
        .clone()
        .with_lease(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), permit.lost())
        .await
        .expect("lost() resolves when the fixed lease runs out");
    assert_eq!(
        permit.lost_reason(),
        Some(redlatch::LostReason::LeaseRanOut)
    );
    // Someone else reclaims it and takes it over.
    let taken = other
        .permit_semaphore("short")
        .acquire_within(Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(matches!(
        permit.release().await,
        Err(redlatch::Error::NotHeld { .. })
    ));
    assert_eq!(
        slots.available_permits().await.unwrap(),
        0,
        "the late release gave nothing back twice"
    );
    drop(taken);
}

#[tokio::test]
async fn waiter_wakes_on_release_and_layout_is_redissons() {
    let server = common::server();
    let holder = common::client(&server).await;
    let waiter = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let slots = holder.permit_semaphore("layout");
    slots.try_set_permits(1).await.unwrap();
    let permit = slots.acquire().await.unwrap();
    let count: i64 = admin.get("layout").await.unwrap();
    assert_eq!(count, 0);
    let now_ms = {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut admin).await.unwrap();
        secs * 1000 + micros / 1000
    };
    // Stored as the id's 16 raw bytes, as Redisson stores its permit ids.
    let expiry: f64 = admin
        .zscore("{layout}:timeout", raw_id(permit.id()))
        .await
        .unwrap();
    let lease_ms = redlatch::Settings::DEFAULT_LEASE.as_millis() as f64;
    assert!(
        (expiry - now_ms as f64 - lease_ms).abs() < 5_000.0,
        "expiry {expiry} is not about now ({now_ms}) + the lease"
    );
    let waiting =
        tokio::spawn(async move { waiter.permit_semaphore("layout").acquire().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    let released_at = Instant::now();
    permit.release().await.unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken")
        .unwrap();
    assert!(
        released_at.elapsed() < Duration::from_millis(650),
        "woken by the message, not the 1 s recheck: {:?}",
        released_at.elapsed()
    );
    assert!(taken.is_held());
}

#[tokio::test]
async fn bad_input_gives_typed_errors() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let () = admin.set("{odd}:timeout", "x").await.unwrap();
    let odd = client.permit_semaphore("odd");
    assert!(matches!(
        odd.try_acquire().await,
        Err(redlatch::Error::WrongValue { .. })
    ));
    assert!(matches!(
        odd.available_permits().await,
        Err(redlatch::Error::WrongValue { .. })
    ));
    assert!(matches!(
        client.permit_semaphore("").try_acquire().await,
        Err(redlatch::Error::InvalidName { .. })
    ));
    assert!(matches!(
        client
            .permit_semaphore("p")
            .with_lease(Duration::ZERO)
            .acquire()
            .await,
        Err(redlatch::Error::InvalidDuration { .. })
    ));
}

#[tokio::test]
async fn many_permits_of_one_client_are_renewed_in_batches() {
    const HELD: u32 = 150;
    let server = common::server();
    let client = common::client_with_lease(&server, Duration::from_millis(300)).await;
    let mut admin = common::admin(&server).await;
    let slots = client.permit_semaphore("many");
    slots.try_set_permits(HELD).await.unwrap();
    let mut permits = Vec::new();
    for _ in 0..HELD {
        permits.push(slots.try_acquire().await.unwrap().expect("a free permit"));
    }
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    // Ten renewal periods of 100 ms: unbatched, that would be 1,500 script calls.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let calls = common::script_calls(&mut admin).await;
    assert!(permits.iter().all(|permit| permit.is_held()));
    assert!(calls >= 10, "renewals did not run: {calls} script calls");
    assert!(
        calls <= 150,
        "{calls} renewal calls for {HELD} permits in ten periods"
    );
    eprintln!("{calls} renewal script calls kept {HELD} permits alive for 1 s (lease 300 ms)");
}

//! The token lock (`client.token_lock`) in the lab: the same faults and
//! the same judge as the default lock, and, on a server that releases and
//! renews without scripts, a lab run on that script-free path.

use std::time::Duration;

use crate::harness::{cell, check, figure, turn, violations, words};
use crate::network::first_fault;

/// Faults the default lock promises everything under, as its tests run
/// them (`redlatch_keeps_its_promises_under_the_faults_it_survives`, the
/// latency test), and the baseline.
const SURVIVED: [&str; 7] = [
    "none",
    "kill-client",
    "flush-scripts",
    "kill-subscribers",
    "pause-redis",
    "restart-redis-late",
    "latency",
];

#[test]
fn the_token_lock_keeps_the_default_locks_promises_under_the_same_faults() {
    // A 1 s lease, as for the default lock: a stall of the machine itself
    // longer than the lease would be a pause no lock promises to survive.
    let mut args = words("--recipe redlatch-token --duration 3s --lease 1s --fault restart-redis");
    for fault in SURVIVED {
        args.extend(["--fault", fault]);
    }
    let (code, report) = check(&args);
    for fault in SURVIVED {
        let cell = cell(&report, "redlatch-token", fault);
        assert_eq!(cell["promised"]["exclusive"], true, "{fault}: {cell}");
        assert!(violations(cell).is_empty(), "{fault}: {cell}");
        assert_eq!(cell["status"], "ok", "{fault}: {cell}");
        if fault != "none" {
            first_fault(cell);
        }
        assert!(
            figure(cell, "sections") > 5,
            "{fault}: the workers must have worked: {cell}"
        );
    }
    // Not promised against: Redis restarted empty forgets the lock; the
    // promise left is that someone acquires again.
    let restarted = cell(&report, "redlatch-token", "restart-redis");
    first_fault(restarted);
    assert_eq!(restarted["promised"]["live"], true, "{restarted}");
    assert_ne!(restarted["status"], "broken", "{restarted}");
    assert_eq!(report["promises_kept"], true, "{report}");
    assert_eq!(code, 0);
}

#[test]
fn the_fenced_token_lock_refuses_a_paused_or_cut_off_holders_late_writes() {
    // As `redlatch-fenced` is tested: a holder cut off (both ways, one way)
    // past its lease goes on writing, and a paused one writes when it wakes.
    let (code, report) = check(&words(
        "--recipe redlatch-token-fenced --fault partition --fault partition-one-way \
         --fault pause-client --duration 4s --lease 1s",
    ));
    for fault in ["partition", "partition-one-way"] {
        let cut = cell(&report, "redlatch-token-fenced", fault);
        first_fault(cut);
        assert_eq!(figure(cut, "stale_accepted"), 0, "{fault}: {cut}");
        assert_eq!(figure(cut, "lost_updates"), 0, "{fault}: {cut}");
        assert_eq!(cut["status"], "ok", "{fault}: {cut}");
    }
    let paused = cell(&report, "redlatch-token-fenced", "pause-client");
    first_fault(paused);
    assert_eq!(figure(paused, "stale_accepted"), 0, "{paused}");
    assert_eq!(figure(paused, "lost_updates"), 0, "{paused}");
    assert!(
        figure(paused, "stale_rejected") > 0,
        "the late write must be refused: {paused}"
    );
    assert_ne!(paused["status"], "broken", "{paused}");
    assert_eq!(report["promises_kept"], true, "{report}");
    assert_eq!(code, 0);
}

#[test]
fn the_token_lock_keeps_its_promises_on_this_server() {
    // The server matrix runs this on each flavour (REDIS_SERVER): the lab's
    // lock server is the same binary as this test's.
    let (script_free, expected) = {
        // Not beside another test's lab run.
        let _turn = turn();
        let server = testkit::RedisServer::start().expect("start redis-server");
        let expected = releases_and_renews_without_scripts(&server_info(&server.url()));
        let script_free = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async {
                let client = redlatch::Client::connect(&server.url())
                    .await
                    .expect("connect");
                let lock = client.token_lock("lab:probe");
                // The first use asks the server what it has.
                let guard = lock.acquire().await.expect("acquire");
                guard.release().await.expect("release");
                lock.is_script_free()
            });
        (script_free, expected)
    };
    eprintln!("token lock script-free here: {script_free} (expected {expected})");
    assert_eq!(
        script_free, expected,
        "Valkey 9.0+ and Redis 8.4+ release and renew it without scripts"
    );

    let (code, report) = check(&[
        "--recipe",
        "redlatch-token",
        "--fault",
        "kill-client",
        "--duration",
        "2s",
        "--lease",
        "1s",
    ]);
    let killed = cell(&report, "redlatch-token", "kill-client");
    first_fault(killed);
    assert!(violations(killed).is_empty(), "{killed}");
    assert_eq!(killed["status"], "ok", "{killed}");
    assert!(figure(killed, "sections") > 5, "{killed}");
    assert_eq!(code, 0);
}

/// `INFO server` of the server at `url`, as `name:value` lines.
fn server_info(url: &str) -> String {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect");
    redis::cmd("INFO")
        .arg("server")
        .query(&mut conn)
        .expect("INFO server")
}

/// Whether a server of this `INFO` has a delete-if-equal (`DELIFEQ`: Valkey
/// 9.0+; `DELEX … IFEQ`: Redis 8.4+) and `SET … IFEQ` (Valkey 8.1+, Redis 8.4+).
fn releases_and_renews_without_scripts(info: &str) -> bool {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(|version| {
                let mut parts = version.trim().split('.').map(|part| part.parse::<u32>());
                (
                    parts.next().and_then(Result::ok).unwrap_or(0),
                    parts.next().and_then(Result::ok).unwrap_or(0),
                )
            })
    };
    // Valkey also reports the Redis version it is compatible with (7.2.4).
    match field("valkey_version") {
        Some(valkey) => valkey >= (9, 0),
        None => field("redis_version").is_some_and(|redis| redis >= (8, 4)),
    }
}

//! The safety lab end to end: `redlatch check` runs real worker processes
//! against throwaway redis-servers, injects each fault, and must catch
//! every broken recipe under its fault while redlatch's lock keeps what it
//! promises. Runs are short (2–6 s); longer ones belong to the command.
//! The tests take turns: runs side by side would stall each other's workers.
//! The network faults, the failover, the soak, the token lock's runs, the
//! drawings and the reports (text, and HTML in headless Chromium) are in
//! `check/`; so is the comparison of the CLI README with `--help` (`check/readme.rs`),
//! here to keep test binaries few.

#[path = "check/failover.rs"]
mod failover;
#[path = "check/harness.rs"]
mod harness;
#[path = "check/network.rs"]
mod network;
#[path = "check/readme.rs"]
mod readme;
#[path = "check/report.rs"]
mod report;
#[path = "check/soak.rs"]
mod soak;
#[path = "check/token_lock.rs"]
mod token_lock;

use std::process::Command;

use harness::{BIN, cell, check, figure, violations, words};
use serde_json::Value;

#[test]
fn a_noop_lock_is_caught_with_overlaps_and_fails_the_exit_status() {
    let (code, report) = check(&["--recipe", "noop", "--fault", "none", "--duration", "2s"]);
    let noop = cell(&report, "noop", "none");
    assert!(figure(noop, "overlaps") > 0, "no overlap caught: {noop}");
    assert_eq!(noop["status"], "broken");
    assert_eq!(report["promises_kept"], false);
    assert_eq!(code, 1, "a broken promise must fail the command");
}

#[test]
fn setnx_expire_crashing_between_its_commands_leaves_nobody_acquiring() {
    let (code, report) = check(&words(
        "--recipe setnx-expire --fault crash-between --duration 5s",
    ));
    let setnx = cell(&report, "setnx-expire", "crash-between");
    // The lab arms a worker 0.3 s in, but it crashes only once it next wins
    // the lock, later on a busy machine: judge from the crash itself. A
    // second crash needs the stuck key deleted by a holder that outlived its
    // lease; the last crash is the one that stands.
    let crashed_at = setnx["figures"]["faults_at_ms"]
        .as_array()
        .and_then(|times| times.last())
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no worker crashed: {setnx}"));
    assert_eq!(setnx["figures"]["no_acquire_to_end"], true, "{setnx}");
    assert!(
        figure(setnx, "no_acquire_from_ms") <= crashed_at,
        "someone acquired after the crash at {crashed_at} ms: {setnx}"
    );
    // Stuck means nobody acquired for over 3 leases + 1 s; the run must
    // leave that long after the crash (a crash up to 2.4 s late here).
    let stuck_ms = 3 * report["lease_ms"].as_u64().expect("lease_ms") + 1_000;
    let after_crash = report["duration_ms"]
        .as_u64()
        .expect("duration_ms")
        .saturating_sub(crashed_at);
    assert!(
        after_crash >= stuck_ms + 100,
        "the crash came {crashed_at} ms in, too late to judge liveness: {setnx}"
    );
    assert!(violations(setnx).contains(&"stuck".to_owned()), "{setnx}");
    assert_eq!(
        setnx["status"], "expected",
        "a broken recipe failing is expected"
    );
    assert_eq!(code, 0);
}

#[test]
fn get_del_paused_between_get_and_del_overlaps_the_next_holders() {
    // A pause takes effect only when the armed worker next releases, which
    // on a busy machine can be well over a second after it is armed, and a
    // DEL that races the victim's own release shows no overlap. 6 s leaves
    // room for two or three pauses to end inside the run even so.
    let (code, report) = check(&words(
        "--recipe get-del --fault pause-client --duration 6s",
    ));
    let get_del = cell(&report, "get-del", "pause-client");
    assert!(figure(get_del, "overlaps") > 0, "{get_del}");
    let overlap = get_del["counter_examples"]
        .as_array()
        .and_then(|examples| {
            examples
                .iter()
                .find(|example| example["violation"] == "overlap")
        })
        .expect("an overlap counter-example");
    let timeline = overlap["timeline"].to_string();
    assert!(timeline.contains("stops itself at between"), "{timeline}");
    assert!(
        timeline.contains("'s lock"),
        "the DEL of another's lock is shown: {timeline}"
    );
    assert_eq!(code, 0);
}

#[test]
fn a_paused_holder_loses_an_update_without_fencing_and_is_refused_with_it() {
    let (code, report) = check(&words(
        "--recipe set-nx-px --recipe redlatch-fenced --fault pause-client --duration 3s",
    ));
    let plain = cell(&report, "set-nx-px", "pause-client");
    assert!(figure(plain, "lost_updates") > 0, "{plain}");
    assert!(figure(plain, "stale_accepted") > 0, "{plain}");
    let fenced = cell(&report, "redlatch-fenced", "pause-client");
    assert_eq!(figure(fenced, "stale_accepted"), 0, "{fenced}");
    assert_eq!(figure(fenced, "lost_updates"), 0, "{fenced}");
    assert!(
        figure(fenced, "stale_rejected") > 0,
        "the late write must be refused: {fenced}"
    );
    assert_ne!(fenced["status"], "broken");
    assert_eq!(code, 0);
}

#[test]
fn redlatch_keeps_its_promises_under_the_faults_it_survives() {
    let faults = [
        "kill-client",
        "flush-scripts",
        "kill-subscribers",
        "pause-redis",
        "restart-redis-late",
    ];
    // A 1 s lease: a stall of the machine itself longer than the lease
    // would be a pause the lock does not promise to survive.
    let mut args = vec!["--recipe", "redlatch", "--duration", "3s", "--lease", "1s"];
    for fault in &faults {
        args.extend(["--fault", fault]);
    }
    let (code, report) = check(&args);
    for fault in faults {
        let cell = cell(&report, "redlatch", fault);
        assert!(violations(cell).is_empty(), "{fault}: {cell}");
        assert_eq!(cell["status"], "ok", "{fault}: {cell}");
        assert!(
            figure(cell, "sections") > 10,
            "{fault}: the workers must have worked: {cell}"
        );
    }
    assert_eq!(code, 0);
}

#[test]
fn the_recipe_that_needs_replicas_is_not_run_under_script_or_subscriber_faults() {
    // It runs on a Sentinel group, which only the failover cell has: under
    // these faults its workers found no server and a full `check` said
    // BROKEN (and exited 1) for want of anyone acquiring.
    let (code, report) = check(&words(
        "--recipe redlatch-wait --fault flush-scripts --fault kill-subscribers --duration 1s",
    ));
    for fault in ["flush-scripts", "kill-subscribers"] {
        let cell = cell(&report, "redlatch-wait", fault);
        assert_eq!(cell["status"], "not-applicable", "{fault}: {cell}");
    }
    assert_eq!(code, 0, "{report}");
}

#[test]
fn bad_options_are_usage_errors() {
    for args in [
        &["check", "--workers", "0"][..],
        &["check", "--fault", "meteor"],
        &["check", "--lease", "1ms"],
    ] {
        let status = Command::new(BIN).args(args).output().expect("run").status;
        assert_eq!(status.code(), Some(64), "{args:?}");
    }
}

#[test]
fn redlock_keeps_its_promises_with_one_master_of_five_faulted() {
    let (code, report) = check(&words(
        "--recipe redlock --recipe redlock-fenced --fault pause-redis --fault pause-client --duration 4s --lease 1s",
    ));
    let paused_master = cell(&report, "redlock", "pause-redis");
    assert!(violations(paused_master).is_empty(), "{paused_master}");
    assert!(figure(paused_master, "sections") > 10, "{paused_master}");
    let fenced = cell(&report, "redlock-fenced", "pause-client");
    assert_eq!(figure(fenced, "stale_accepted"), 0, "{fenced}");
    assert_eq!(figure(fenced, "lost_updates"), 0, "{fenced}");
    assert!(figure(fenced, "stale_rejected") > 0, "{fenced}");
    assert_eq!(report["promises_kept"], true, "{report}");
    assert_eq!(code, 0);
}

/// `check --deadlock`: two workers locking two names in opposite orders.
/// Detection ends the cycle by refusing one worker, far sooner than the
/// seeds' lease or a wait limit; without detection and without a limit,
/// the watchdog keeps the cycle for ever (stopped by the scenario).
#[test]
fn the_deadlock_scenario_finds_the_cycle_before_any_lease_or_wait_ends_it() {
    let (code, report) = check(&words("--deadlock --duration 1s --lease 300ms"));
    assert_eq!(code, 0, "{report}");
    let rows = report["rows"].as_array().expect("rows");
    let row = |prefix: &str| {
        rows.iter()
            .find(|row| {
                row["recipe"]
                    .as_str()
                    .is_some_and(|r| r.starts_with(prefix))
            })
            .unwrap_or_else(|| panic!("no row {prefix}: {report}"))
    };
    let detected = row("redlatch (deadlock detection)");
    assert!(
        detected["outcome"]
            .as_str()
            .unwrap()
            .contains("refused (Error::Deadlock)"),
        "{detected}"
    );
    // Milliseconds in practice; bounded generously, below the seeds' lease.
    assert!(
        detected["ended_after_ms"].as_u64().unwrap() < 300,
        "{detected}"
    );
    let waited = row("redlatch, no detection, wait");
    assert!(
        waited["ended_after_ms"].as_u64().unwrap() >= 1000,
        "{waited}"
    );
    let seeds = row("set-nx-px");
    assert!(seeds["ended_after_ms"].as_u64().unwrap() >= 250, "{seeds}");
    let watchdog = row("redlatch, no detection, watchdog");
    assert_eq!(watchdog["ended_after_ms"], Value::Null, "{watchdog}");
}

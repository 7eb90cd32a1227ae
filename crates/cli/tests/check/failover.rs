//! A Sentinel failover that loses a grant: the master is killed right
//! after granting a lock it has not replicated.

use crate::harness::{cell, check, figure, violations};
use crate::network::first_fault;

#[test]
fn a_failover_grants_the_plain_lock_twice_and_replica_wait_prevents_it() {
    // The cell runs with a 10 s lease and for 6 s whatever the options
    // say: the old holder must still believe it holds after the failover.
    let (code, report) = check(&[
        "--recipe",
        "redlatch",
        "--recipe",
        "redlatch-wait",
        "--fault",
        "failover",
    ]);
    let plain = cell(&report, "redlatch", "failover");
    first_fault(plain);
    assert_eq!(plain["lease_ms"], 10_000, "{plain}");
    assert!(figure(plain, "overlaps") > 0, "no double grant: {plain}");
    assert!(violations(plain).contains(&"overlap".to_owned()), "{plain}");
    assert_eq!(plain["status"], "expected", "not promised against: {plain}");
    let timeline = plain["counter_examples"][0]["timeline"].to_string();
    assert!(timeline.contains("Sentinel promoted"), "{timeline}");

    let waited = cell(&report, "redlatch-wait", "failover");
    first_fault(waited);
    assert!(violations(waited).is_empty(), "{waited}");
    assert_eq!(figure(waited, "stale_accepted"), 0, "{waited}");
    assert!(
        figure(waited, "sections") > 5,
        "the lock works again after the failover: {waited}"
    );
    assert_eq!(code, 0);
}

//! `check --soak`: many short cells under a seeded fault mix, summed.

use serde_json::Value;

use crate::harness::{check, words};

fn totals_sum(report: &Value, name: &str) -> u64 {
    report["totals"]
        .as_array()
        .expect("totals")
        .iter()
        .map(|totals| totals[name].as_u64().expect(name))
        .sum()
}

#[test]
fn a_soak_of_the_fenced_lock_adds_up_its_cells_and_keeps_every_promise() {
    let (code, report) = check(&words(
        "--soak 400 --seed 3 --fault none --fault kill-client --duration 1s --think 1ms",
    ));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["seed"], 3);
    assert_eq!(report["promises_kept"], true);
    let sections = report["sections"].as_u64().expect("sections");
    assert!(sections >= 400, "stopped short: {report}");
    assert_eq!(totals_sum(&report, "sections"), sections);
    assert_eq!(
        totals_sum(&report, "runs"),
        report["cells"].as_u64().unwrap()
    );
    for name in ["overlaps", "lost_updates", "stale_accepted"] {
        assert_eq!(totals_sum(&report, name), 0, "{name}: {report}");
    }
    assert!(
        report["totals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|totals| totals["recipe"] == "redlatch-fenced")
    );
    assert_eq!(report["broken"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_soak_of_no_lock_reports_the_cells_that_broke_its_promises() {
    let (code, report) = check(&words(
        "--soak 100 --recipe noop --fault none --duration 1s",
    ));
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["promises_kept"], false);
    let broken = report["broken"].as_array().expect("broken cells");
    assert!(!broken.is_empty(), "{report}");
    assert_eq!(broken[0]["status"], "broken", "{report}");
    assert!(totals_sum(&report, "overlaps") > 0, "{report}");
}

#[test]
fn a_soak_with_no_fault_that_applies_is_a_usage_error() {
    let (code, _) = check(&words("--soak 10 --recipe set-nx-px --fault failover"));
    assert_eq!(code, 64);
}

//! Network faults between the workers and the lock servers, through the
//! lab's proxies: a holder cut off past its lease, a slow and lossy
//! network, and Redlock masters restarted under bare majorities.

use serde_json::Value;

use crate::harness::{
    cell, check, distinct_timelines, figure, heading_names, shown_violations, violations, words,
};

#[test]
fn a_holder_cut_off_past_its_lease_loses_updates_unfenced_and_fenced_refuses_nothing_stale() {
    // Both ways, and one way (its requests arrive, the replies do not).
    let dir = tempfile::tempdir().expect("temp dir");
    let svg = dir.path().join("timelines.svg");
    let svg_arg = svg.to_string_lossy().into_owned();
    // A 1 s lease: a stall of the machine longer than the lease would be a
    // pause, which the lock does not promise to survive.
    let (code, report) = check(&[
        "--recipe",
        "set-nx-px",
        "--recipe",
        "redlatch-fenced",
        "--fault",
        "partition",
        "--fault",
        "partition-one-way",
        "--duration",
        "4s",
        "--lease",
        "1s",
        "--svg",
        &svg_arg,
    ]);
    for fault in ["partition", "partition-one-way"] {
        let plain = cell(&report, "set-nx-px", fault);
        // Judged from the cut itself: the holder goes on writing after it.
        let cut_at = first_fault(plain);
        assert!(
            figure(plain, "lost_updates") > 0,
            "cut at {cut_at} ms: {plain}"
        );
        assert!(figure(plain, "stale_accepted") > 0, "{plain}");
        assert!(
            violations(plain).contains(&"lost-update".to_owned()),
            "{plain}"
        );
        let fenced = cell(&report, "redlatch-fenced", fault);
        first_fault(fenced);
        assert_eq!(figure(fenced, "stale_accepted"), 0, "{fenced}");
        assert_eq!(figure(fenced, "lost_updates"), 0, "{fenced}");
        assert_eq!(fenced["status"], "ok", "{fenced}");
    }
    assert_eq!(code, 0);

    // Each counter-example is drawn: valid SVG, one panel per drawing.
    let text = std::fs::read_to_string(&svg).expect("the SVG file");
    let document = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let titles: Vec<&str> = root
        .descendants()
        .filter(|node| node.has_tag_name("text") && node.attribute("font-weight") == Some("bold"))
        .filter_map(|node| node.text())
        .collect();
    // A stretch that shows several violations is drawn once, titled with all.
    assert!(
        !titles.is_empty() && titles.len() <= distinct_timelines(&report),
        "{titles:?}"
    );
    for (recipe, fault, violation) in shown_violations(&report) {
        assert!(
            titles
                .iter()
                .any(|title| heading_names(title, &recipe, &fault, &violation)),
            "{recipe} under {fault}: {violation} is not drawn: {titles:?}"
        );
    }
    assert!(
        titles
            .iter()
            .any(|title| heading_names(title, "set-nx-px", "partition", "LostUpdate")),
        "{titles:?}"
    );
    // The lost update is drawn (orange mark) and the cut is explained.
    assert!(
        root.descendants()
            .any(|node| node.has_tag_name("circle") && node.attribute("fill") == Some("#f08c00"))
    );
    assert!(text.contains("cuts w"), "the lab's cut is named");
}

#[test]
fn a_slow_lossy_network_leaves_no_false_holder_and_redlock_still_grants() {
    // redlatch with a 1 s lease (a machine stall past a shorter one would be
    // a pause, which no lock survives), Redlock with the lab's 500 ms.
    for (recipe, lease) in [("redlatch", "1s"), ("redlock", "500ms")] {
        let (code, report) = check(&[
            "--recipe",
            recipe,
            "--fault",
            "latency",
            "--duration",
            "3s",
            "--lease",
            lease,
        ]);
        let slow = cell(&report, recipe, "latency");
        first_fault(slow);
        assert!(violations(slow).is_empty(), "{slow}");
        assert_eq!(figure(slow, "overlaps"), 0, "{slow}");
        // Redlock's per-node timeout must leave room for a 100 ms round
        // trip, or no master answers in time and nobody ever acquires.
        assert!(
            figure(slow, "sections") > 5,
            "the workers must have worked: {slow}"
        );
        assert_eq!(slow["status"], "ok", "{slow}");
        assert_eq!(code, 0);
    }
}

#[test]
fn redlock_under_bare_majorities_needs_the_delayed_restart() {
    let (code, report) = check(&words(
        "--recipe redlock --fault restart-master --fault restart-master-late --duration 4s",
    ));
    let at_once = cell(&report, "redlock", "restart-master");
    first_fault(at_once);
    assert!(
        figure(at_once, "overlaps") > 0,
        "no double grant: {at_once}"
    );
    assert_eq!(at_once["status"], "expected", "{at_once}");
    let late = cell(&report, "redlock", "restart-master-late");
    first_fault(late);
    assert!(violations(late).is_empty(), "{late}");
    assert_eq!(late["status"], "ok", "{late}");
    assert_eq!(code, 0);
}

/// When the cell's first fault took effect (ms into the run); fails the
/// test when none did, since nothing would then have been tested.
pub fn first_fault(cell: &Value) -> u64 {
    cell["figures"]["faults_at_ms"]
        .as_array()
        .and_then(|times| times.first())
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("the fault never took effect: {cell}"))
}

//! The harness runs end to end: a short contention measure produces a
//! table with a row per figure and a column per lock implementation.

use std::process::Command;

#[test]
fn quick_contention_measure_prints_a_row_per_figure_for_every_contender() {
    let output = Command::new(env!("CARGO_BIN_EXE_redlatch-bench"))
        .args(["--quick", "--measure", "2", "--headline-seconds", "0.3"])
        .output()
        .expect("run redlatch-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let header = stdout
        .lines()
        .find(|line| line.starts_with("| figure |"))
        .unwrap_or_else(|| panic!("no figure table in:\n{stdout}"));
    for contender in ["redlatch", "rslock 0.10", "redlock 2.0"] {
        assert!(header.contains(contender), "{contender} missing: {header}");
    }
    let acquisitions = stdout
        .lines()
        .find(|line| line.starts_with("| acquisitions/s |"))
        .unwrap_or_else(|| panic!("no acquisitions/s row in:\n{stdout}"));
    // Each cell is a number: every contender got the lock at least once.
    let cells: Vec<&str> = acquisitions.split('|').map(str::trim).collect();
    for cell in &cells[2..cells.len() - 1] {
        let value: f64 = cell
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {cell:?} in {acquisitions}"));
        assert!(value > 0.0, "{acquisitions}");
    }
}

//! Running `redlatch check` and reading its JSON report.

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_redlatch");

/// One lab run at a time.
static TURN: Mutex<()> = Mutex::new(());

/// A turn of this binary's tests to use the machine alone (a lab run, or a
/// browser beside one, would stall another run's workers).
pub fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The words of a command line with no quoting, as arguments:
/// `words("--recipe get-del --fault none")`.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `redlatch check --json ARGS`; returns the exit status and the report.
pub fn check(args: &[&str]) -> (i32, Value) {
    let _turn = turn();
    let output = Command::new(BIN)
        .arg("check")
        .arg("--json")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run redlatch check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!(
        "redlatch check {args:?} -> {:?}\n{stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), report)
}

/// Runs `redlatch check ARGS` for its text report; returns the exit status
/// and what it printed.
pub fn check_text(args: &[&str]) -> (i32, String) {
    let _turn = turn();
    let output = Command::new(BIN)
        .arg("check")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run redlatch check");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!(
        "redlatch check {args:?} -> {:?}\n{stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), stdout)
}

/// The counter-examples of every cell with the same timeline counted once.
pub fn distinct_timelines(report: &Value) -> usize {
    let mut seen: Vec<&Value> = Vec::new();
    for cell in report["cells"].as_array().expect("cells") {
        for example in cell["counter_examples"].as_array().into_iter().flatten() {
            if !seen.contains(&&example["timeline"]) {
                seen.push(&example["timeline"]);
            }
        }
    }
    seen.len()
}

/// Every (recipe, fault, violation) the report's counter-examples show,
/// the violation named as the text and drawings name it (`LostUpdate`).
pub fn shown_violations(report: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for cell in report["cells"].as_array().expect("cells") {
        for example in cell["counter_examples"].as_array().into_iter().flatten() {
            let kebab = example["violation"].as_str().expect("violation");
            let camel: String = kebab
                .split('-')
                .map(|word| {
                    let mut chars = word.chars();
                    chars.next().map_or_else(String::new, |first| {
                        first.to_ascii_uppercase().to_string() + chars.as_str()
                    })
                })
                .collect();
            out.push((
                cell["recipe"].as_str().expect("recipe").to_owned(),
                cell["fault"].as_str().expect("fault").to_owned(),
                camel,
            ));
        }
    }
    out
}

/// Whether a heading names `violation` of `recipe` under `fault`:
/// `RECIPE under FAULT: V1 (expected), V2 (expected)[; ...]`.
pub fn heading_names(heading: &str, recipe: &str, fault: &str, violation: &str) -> bool {
    heading
        .split("; ")
        .filter_map(|part| part.strip_prefix(&format!("{recipe} under {fault}: ")))
        .any(|violations| violations.contains(&format!("{violation} (")))
}

/// The cell for `recipe` under `fault`.
pub fn cell<'a>(report: &'a Value, recipe: &str, fault: &str) -> &'a Value {
    report["cells"]
        .as_array()
        .and_then(|cells| {
            cells
                .iter()
                .find(|cell| cell["recipe"] == recipe && cell["fault"] == fault)
        })
        .unwrap_or_else(|| panic!("no cell {recipe} × {fault} in {report}"))
}

pub fn figure(cell: &Value, name: &str) -> u64 {
    cell["figures"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no figure {name} in {cell}"))
}

pub fn violations(cell: &Value) -> Vec<String> {
    cell["counter_examples"]
        .as_array()
        .map(|examples| {
            examples
                .iter()
                .map(|example| example["violation"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

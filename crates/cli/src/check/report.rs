//! What `redlatch check` prints: the recipe × fault table and the first
//! counter-example of each violation, as text or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::checker::{CounterExample, Figures, Findings};
use super::faults::Fault;
use super::recipes::{Promise, RecipeName};
use super::verdict::{Status, promised_against};

/// One cell of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The recipe.
    pub recipe: RecipeName,
    /// The fault.
    pub fault: Fault,
    /// The verdict.
    pub status: Status,
    /// What the recipe promises under this fault.
    pub promised: Promise,
    /// The lease this cell ran with (some faults need a longer one).
    pub lease_ms: u64,
    /// How long this cell ran.
    pub duration_ms: u64,
    /// Why the cell was not run, or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The figures and counter-examples, when it ran.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Findings>,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Worker processes per run.
    pub workers: u32,
    /// Length of each run, milliseconds.
    pub duration_ms: u64,
    /// The lease, milliseconds.
    pub lease_ms: u64,
    /// Every cell, recipe by recipe.
    pub cells: Vec<Cell>,
    /// False when some recipe broke a promise.
    pub promises_kept: bool,
}

/// The table and counter-examples for people.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} workers, {} ms per run, lease {} ms\n",
        report.workers, report.duration_ms, report.lease_ms
    );
    let _ = writeln!(
        out,
        "{:<16} {:<19} {:>8} {:>8} {:>5} {:>9} {:>9} {:>9}  verdict",
        "recipe", "fault", "sections", "overlaps", "lost", "stale-acc", "stale-rej", "max-gap",
    );
    for cell in &report.cells {
        let figures = cell.findings.as_ref().map(|findings| &findings.figures);
        let mut verdict = match &cell.note {
            Some(note) => format!("{} ({note})", cell.status.word()),
            None => cell.status.word().to_owned(),
        };
        if cell.lease_ms != report.lease_ms || cell.duration_ms != report.duration_ms {
            let _ = write!(
                verdict,
                " [lease {} ms, {} ms run]",
                cell.lease_ms, cell.duration_ms
            );
        }
        let _ = writeln!(
            out,
            "{:<16} {:<19} {:>8} {:>8} {:>5} {:>9} {:>9} {:>9}  {verdict}",
            cell.recipe.name(),
            cell.fault.name(),
            figure(figures, |f| f.sections),
            figure(figures, |f| f.overlaps),
            figure(figures, |f| f.lost_updates),
            figure(figures, |f| f.stale_accepted),
            figure(figures, |f| f.stale_rejected),
            figures.map_or_else(|| "-".to_owned(), gap),
        );
    }
    for cell in &report.cells {
        let Some(findings) = &cell.findings else {
            continue;
        };
        for example in &findings.counter_examples {
            let _ = writeln!(out, "\n{}", example_title(cell, example));
            for line in &example.timeline {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    let _ = write!(
        out,
        "\n{}",
        if report.promises_kept {
            "every recipe kept what it promises"
        } else {
            "a recipe broke a promise (BROKEN above)"
        }
    );
    out
}

fn figure(figures: Option<&Figures>, pick: impl Fn(&Figures) -> u64) -> String {
    figures.map_or_else(|| "-".to_owned(), |figures| pick(figures).to_string())
}

fn gap(figures: &Figures) -> String {
    format!(
        "{:.2}s{}",
        figures.longest_no_acquire_ms as f64 / 1000.0,
        if figures.no_acquire_to_end { "+" } else { "" }
    )
}

/// A counter-example's heading: `RECIPE under FAULT: VIOLATION (expected)`,
/// or `(PROMISED AGAINST)` when the recipe promised it would not happen.
pub fn example_title(cell: &Cell, example: &CounterExample) -> String {
    let promised = promised_against(cell.promised, example.violation);
    format!(
        "{} under {}: {:?} ({})",
        cell.recipe.name(),
        cell.fault.name(),
        example.violation,
        if promised {
            "PROMISED AGAINST"
        } else {
            "expected"
        }
    )
}

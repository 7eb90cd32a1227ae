//! What `redlatch check` prints: the recipe × fault table and the first
//! counter-example of each violation, as text or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::checker::{CounterExample, Figures, Findings};
use super::fault::Fault;
use super::recipes::RecipeName;
use super::recipes::info::Promise;
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
        "{:<21} {:<19} {:>8} {:>8} {:>5} {:>9} {:>9} {:>9} {:>10} {:>6}  verdict",
        "recipe",
        "fault",
        "sections",
        "overlaps",
        "lost",
        "stale-acc",
        "stale-rej",
        "max-gap",
        "fault-at",
        "errors",
    );
    for cell in &report.cells {
        let figures = cell.findings.as_ref().map(|findings| &findings.figures);
        let verdict = verdict(cell, report);
        let _ = writeln!(
            out,
            "{:<21} {:<19} {:>8} {:>8} {:>5} {:>9} {:>9} {:>9} {:>10} {:>6}  {verdict}",
            cell.recipe.name(),
            cell.fault.name(),
            figure(figures, |f| f.sections),
            figure(figures, |f| f.overlaps),
            figure(figures, |f| f.lost_updates),
            figure(figures, |f| f.stale_accepted),
            figure(figures, |f| f.stale_rejected),
            figures.map_or_else(|| "-".to_owned(), gap),
            figures.map_or_else(|| "-".to_owned(), |figures| fault_at(cell.fault, figures)),
            figure(figures, |f| f.errors),
        );
    }
    for shown in distinct_examples(report) {
        let _ = writeln!(out, "\n{}", shown.heading());
        let _ = writeln!(out, "  {}", shown.example.caption);
        for line in &shown.example.timeline {
            let _ = writeln!(out, "  {line}");
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

/// A cell's verdict in words, with its note, and its lease and run length
/// where they differ from the report's.
pub fn verdict(cell: &Cell, report: &Report) -> String {
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
    verdict
}

pub fn figure(figures: Option<&Figures>, pick: impl Fn(&Figures) -> u64) -> String {
    figures.map_or_else(|| "-".to_owned(), |figures| pick(figures).to_string())
}

pub fn gap(figures: &Figures) -> String {
    format!(
        "{:.2}s{}",
        figures.longest_no_acquire_ms as f64 / 1000.0,
        if figures.no_acquire_to_end { "+" } else { "" }
    )
}

/// When the fault first took effect in a cell, and how many times in all:
/// `0.31s`, `0.31s×3`; `never` when it was armed but never took effect,
/// `-` for no fault.
pub fn fault_at(fault: Fault, figures: &Figures) -> String {
    match (fault, figures.faults_at_ms.as_slice()) {
        (Fault::None, _) => "-".to_owned(),
        (_, []) => "never".to_owned(),
        (_, [first]) => format!("{:.2}s", *first as f64 / 1000.0),
        (_, [first, ..]) => format!(
            "{:.2}s×{}",
            *first as f64 / 1000.0,
            figures.faults_at_ms.len()
        ),
    }
}

/// A counter-example shown once for every violation it illustrates: runs
/// often violate several things in one stretch (the overtaken holder's
/// write is an overlap, a stale write and a lost update at once).
pub struct Shown<'a> {
    /// The counter-example as first seen.
    pub example: &'a CounterExample,
    /// Every (cell, violation) shown by it, the first included.
    pub seen: Vec<(&'a Cell, &'a CounterExample)>,
    /// What they share: `timeline`, or `stretch of the run` (a drawing).
    pub same: &'static str,
}

impl Shown<'_> {
    /// `RECIPE under FAULT: V1 (expected), V2 (PROMISED AGAINST)`, one
    /// such part per cell, and `— the same timeline, seen N times` when
    /// it stands for several.
    pub fn heading(&self) -> String {
        let mut parts: Vec<(String, Vec<String>)> = Vec::new();
        for (cell, example) in &self.seen {
            let whose = format!("{} under {}", cell.recipe.name(), cell.fault.name());
            let what = violation_text(cell, example);
            match parts.iter_mut().find(|(name, _)| *name == whose) {
                Some((_, violations)) => violations.push(what),
                None => parts.push((whose, vec![what])),
            }
        }
        let mut heading = parts
            .iter()
            .map(|(whose, violations)| format!("{whose}: {}", violations.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        if self.seen.len() > 1 {
            let _ = write!(
                heading,
                " — the same {}, seen {} times",
                self.same,
                self.seen.len()
            );
        }
        heading
    }

    /// The distinct values of `part` among the examples shown, each with
    /// the violations it belongs to (`Overlap, StaleWrite`).
    pub fn distinct<'b, T: PartialEq + ?Sized>(
        &'b self,
        part: impl Fn(&'b CounterExample) -> &'b T,
    ) -> Vec<(String, &'b T)> {
        let mut out: Vec<(Vec<String>, &'b T)> = Vec::new();
        for (_, example) in &self.seen {
            let name = format!("{:?}", example.violation);
            match out.iter_mut().find(|(_, value)| *value == part(example)) {
                Some((names, _)) => names.push(name),
                None => out.push((vec![name], part(example))),
            }
        }
        out.into_iter()
            .map(|(names, value)| (names.join(", "), value))
            .collect()
    }
}

/// Every distinct counter-example of `report`, in report order: those with
/// the same timeline as an earlier one are counted there, not repeated.
pub fn distinct_examples(report: &Report) -> Vec<Shown<'_>> {
    group(report, "timeline", |a, b| a.timeline == b.timeline)
}

/// Every distinct drawing of `report`'s counter-examples: those drawn the
/// same as an earlier one, or told by the same timeline, are counted there.
pub fn distinct_drawings(report: &Report) -> Vec<Shown<'_>> {
    group(report, "stretch of the run", |a, b| {
        a.timeline == b.timeline || (a.picture.is_some() && a.picture == b.picture)
    })
}

fn group<'a>(
    report: &'a Report,
    same: &'static str,
    alike: impl Fn(&CounterExample, &CounterExample) -> bool,
) -> Vec<Shown<'a>> {
    let mut shown: Vec<Shown<'a>> = Vec::new();
    for cell in &report.cells {
        let Some(findings) = &cell.findings else {
            continue;
        };
        for example in &findings.counter_examples {
            match shown
                .iter_mut()
                .find(|earlier| alike(earlier.example, example))
            {
                Some(earlier) => earlier.seen.push((cell, example)),
                None => shown.push(Shown {
                    example,
                    seen: vec![(cell, example)],
                    same,
                }),
            }
        }
    }
    shown
}

fn violation_text(cell: &Cell, example: &CounterExample) -> String {
    let promised = promised_against(cell.promised, example.violation);
    format!(
        "{:?} ({})",
        example.violation,
        if promised {
            "PROMISED AGAINST"
        } else {
            "expected"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::checker::Violation;

    fn example(violation: Violation, timeline: &[&str]) -> CounterExample {
        CounterExample {
            violation,
            timeline: timeline.iter().map(|line| (*line).to_owned()).collect(),
            caption: format!("{violation:?} in words."),
            picture: None,
        }
    }

    fn report(examples: Vec<CounterExample>, faults_at_ms: Vec<u64>) -> Report {
        Report {
            workers: 2,
            duration_ms: 3000,
            lease_ms: 500,
            cells: vec![Cell {
                recipe: RecipeName::SetNxPx,
                fault: Fault::PauseClient,
                status: Status::Expected,
                promised: Promise::NOTHING,
                lease_ms: 500,
                duration_ms: 3000,
                note: None,
                findings: Some(Findings {
                    figures: Figures {
                        errors: 7,
                        faults_at_ms,
                        ..Figures::default()
                    },
                    counter_examples: examples,
                }),
            }],
            promises_kept: true,
        }
    }

    #[test]
    fn the_tables_columns_line_up_for_every_recipe_name() {
        let mut report = report(Vec::new(), Vec::new());
        let cell = report.cells[0].clone();
        report.cells = RecipeName::DEFAULT
            .iter()
            .map(|&recipe| Cell {
                recipe,
                ..cell.clone()
            })
            .collect();
        let text = text(&report);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|line| !line.starts_with("recipe"))
            .take(1 + report.cells.len())
            .collect();
        let column = table[0].find("fault").expect("the fault column");
        for row in &table[1..] {
            assert_eq!(row.find("pause-client"), Some(column), "{table:#?}");
        }
    }

    #[test]
    fn a_timeline_several_violations_share_is_printed_once_with_their_count() {
        let shared = [
            "  +0.100s  w1   acquired the lock",
            "  +0.900s  w2   wrote 9",
        ];
        let text = text(&report(
            vec![
                example(Violation::Overlap, &shared),
                example(Violation::LostUpdate, &["  +0.200s  w2   wrote 3"]),
                example(Violation::StaleWrite, &shared),
            ],
            vec![310, 1900],
        ));
        assert_eq!(text.matches("w2   wrote 9").count(), 1, "{text}");
        assert!(
            text.contains(
                "set-nx-px under pause-client: Overlap (expected), StaleWrite (expected) — the same timeline, seen 2 times\n  Overlap in words.\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("set-nx-px under pause-client: LostUpdate (expected)\n"),
            "{text}"
        );
        let header = text.lines().nth(2).expect("the table's header");
        let row = text.lines().nth(3).expect("the row");
        assert!(header.contains("fault-at errors  verdict"), "{header}");
        assert!(row.contains(" 0.31s×2      7  expected"), "{row}");
    }

    #[test]
    fn fault_at_says_when_how_often_or_never() {
        let figures = |faults_at_ms: Vec<u64>| Figures {
            faults_at_ms,
            ..Figures::default()
        };
        assert_eq!(fault_at(Fault::None, &figures(vec![])), "-");
        assert_eq!(fault_at(Fault::PauseRedis, &figures(vec![])), "never");
        assert_eq!(fault_at(Fault::PauseRedis, &figures(vec![1234])), "1.23s");
        assert_eq!(
            fault_at(Fault::PauseRedis, &figures(vec![300, 900, 1500])),
            "0.30s×3"
        );
    }
}

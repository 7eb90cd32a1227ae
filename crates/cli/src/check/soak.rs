//! `redlatch check --soak N`: critical sections by the hundred thousand
//! under a random, seeded mix of faults. Each cell (one recipe under one
//! fault for `--duration`) is judged exactly as in the table; the soak adds
//! up the figures and keeps every cell that broke a promise.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::args::{CheckArgs, PROMISE_BROKEN};
use super::fault::Fault;
use super::judge::{millis, run_cell};
use super::progress;
use super::random::Random;
use super::recipes::RecipeName;
use super::recipes::info::Promise;
use super::report::{self, Cell, Report};
use super::verdict::Status;
use crate::exit::{self, Failure};

/// Cells in a row that may fail to run before the soak gives up.
const FAILED_CELLS_IN_A_ROW: u32 = 3;

/// What a soak did, in total and per recipe × fault.
#[derive(Debug, Serialize)]
pub struct SoakReport {
    /// The seed: `--seed` with it runs the same mix of faults.
    pub seed: u64,
    /// Sections asked for.
    pub goal_sections: u64,
    /// Sections that reached their write.
    pub sections: u64,
    /// Cells run.
    pub cells: u64,
    /// Worker processes per cell.
    pub workers: u32,
    /// Length of each cell, milliseconds (some faults run longer).
    pub duration_ms: u64,
    /// Longest wait inside a section, milliseconds.
    pub think_ms: u64,
    /// The figures added up per recipe × fault.
    pub totals: Vec<Totals>,
    /// Every cell that broke a promise, with its counter-examples.
    pub broken: Vec<Cell>,
    /// Every cell that could not run, with why.
    pub failed: Vec<Cell>,
    /// False when some cell broke a promise.
    pub promises_kept: bool,
}

/// One recipe × fault's figures, summed over its cells.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// The recipe.
    pub recipe: RecipeName,
    /// The fault.
    pub fault: Fault,
    /// What the recipe promises under it.
    pub promised: Promise,
    /// Cells run.
    pub runs: u64,
    /// Sections that reached their write.
    pub sections: u64,
    /// Pairs of workers that held at once.
    pub overlaps: u64,
    /// Accepted writes that overwrote an unread value.
    pub lost_updates: u64,
    /// Accepted writes from an overtaken holder.
    pub stale_accepted: u64,
    /// Writes the store refused for an old fencing token.
    pub stale_rejected: u64,
    /// Calls to Redis that failed.
    pub errors: u64,
}

/// Runs the soak and prints its report; the exit status is the table's.
pub fn soak(json: bool, program: &Path, goal: u64, args: &CheckArgs) -> Result<u8, Failure> {
    let mix = mix(args)?;
    let seed = args
        .seed
        .unwrap_or_else(|| Random::seeded().between(1, u64::from(u32::MAX)));
    let mut random = Random::from_seed(seed);
    let progress = progress::Progress::new(1, !json);
    let mut report = SoakReport {
        seed,
        goal_sections: goal,
        sections: 0,
        cells: 0,
        workers: args.workers,
        duration_ms: millis(args.duration),
        think_ms: millis(args.think),
        totals: Vec::new(),
        broken: Vec::new(),
        failed: Vec::new(),
        promises_kept: true,
    };
    let mut failed_in_a_row = 0;
    let stderr_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    while report.sections < goal && failed_in_a_row < FAILED_CELLS_IN_A_ROW {
        let Some(&(recipe, fault)) = random.pick(&mix) else {
            break;
        };
        let setup = args.setup(program, recipe, fault);
        let label = format!(
            "{} sections, now {} × {}",
            report.sections,
            recipe.name(),
            fault.name()
        );
        let done_before = report.sections as f64 / goal as f64;
        // The bar moves by sections done; a cell's own share is unknown ahead.
        let cell = run_cell(&setup, &|_| progress.at(0, done_before, &label));
        failed_in_a_row = if cell.status == Status::Error {
            failed_in_a_row + 1
        } else {
            0
        };
        add(&mut report, cell);
        if !stderr_is_terminal {
            // Where a long soak run logged to a file has got to.
            eprintln!(
                "soak: {} of {goal} sections after {} cells",
                report.sections, report.cells
            );
        }
    }
    progress.finish();
    let text = if json {
        crate::output::json(&report)?
    } else {
        text(&report)
    };
    crate::output::emit(&text)?;
    Ok(if !report.promises_kept {
        PROMISE_BROKEN
    } else if report.sections < goal {
        exit::UNAVAILABLE
    } else {
        0
    })
}

/// The recipe × fault pairs the soak picks from: the given recipes
/// (default: the fenced lock) under the given faults, or by default under
/// every fault they promise more than liveness under.
fn mix(args: &CheckArgs) -> Result<Vec<(RecipeName, Fault)>, Failure> {
    let recipes = if args.recipes.is_empty() {
        vec![RecipeName::RedlatchFenced]
    } else {
        args.recipes.clone()
    };
    let mut mix = Vec::new();
    for recipe in recipes {
        let promises = recipe.info().promises;
        let faults: Vec<Fault> = if args.faults.is_empty() {
            Fault::ALL
                .iter()
                .copied()
                .filter(|&fault| {
                    let promised = promises(fault);
                    promised.exclusive || promised.no_lost_updates || promised.no_stale_writes
                })
                .collect()
        } else {
            args.faults.clone()
        };
        for fault in faults {
            if fault.applies(&recipe.info()).is_ok() && !mix.contains(&(recipe, fault)) {
                mix.push((recipe, fault));
            }
        }
    }
    if mix.is_empty() {
        return Err(Failure::new(
            exit::USAGE,
            "no fault given applies to the recipes given: nothing to soak",
        ));
    }
    Ok(mix)
}

/// Adds one cell to the report.
fn add(report: &mut SoakReport, cell: Cell) {
    report.cells += 1;
    let index = match report
        .totals
        .iter()
        .position(|totals| totals.recipe == cell.recipe && totals.fault == cell.fault)
    {
        Some(index) => index,
        None => {
            report.totals.push(Totals {
                recipe: cell.recipe,
                fault: cell.fault,
                promised: cell.promised,
                runs: 0,
                sections: 0,
                overlaps: 0,
                lost_updates: 0,
                stale_accepted: 0,
                stale_rejected: 0,
                errors: 0,
            });
            report.totals.len() - 1
        }
    };
    let totals = &mut report.totals[index];
    totals.runs += 1;
    if let Some(findings) = &cell.findings {
        let figures = &findings.figures;
        totals.sections += figures.sections;
        totals.overlaps += figures.overlaps;
        totals.lost_updates += figures.lost_updates;
        totals.stale_accepted += figures.stale_accepted;
        totals.stale_rejected += figures.stale_rejected;
        totals.errors += figures.errors;
        report.sections += figures.sections;
    }
    match cell.status {
        Status::Broken => {
            report.promises_kept = false;
            report.broken.push(cell);
        }
        Status::Error | Status::Unavailable => report.failed.push(cell),
        _ => {}
    }
}

/// The soak's report for people: the totals, then each broken cell as the
/// table would show it.
fn text(report: &SoakReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "soak: {} of {} sections in {} cells (seed {}; {} workers, {} ms per cell, think up to {} ms)\n",
        report.sections,
        report.goal_sections,
        report.cells,
        report.seed,
        report.workers,
        report.duration_ms,
        report.think_ms
    );
    let _ = writeln!(
        out,
        "{:<21} {:<19} {:>5} {:>9} {:>8} {:>5} {:>9} {:>9} {:>7}",
        "recipe",
        "fault",
        "runs",
        "sections",
        "overlaps",
        "lost",
        "stale-acc",
        "stale-rej",
        "errors"
    );
    for totals in &report.totals {
        let _ = writeln!(
            out,
            "{:<21} {:<19} {:>5} {:>9} {:>8} {:>5} {:>9} {:>9} {:>7}",
            totals.recipe.name(),
            totals.fault.name(),
            totals.runs,
            totals.sections,
            totals.overlaps,
            totals.lost_updates,
            totals.stale_accepted,
            totals.stale_rejected,
            totals.errors
        );
    }
    for cell in &report.failed {
        let _ = writeln!(
            out,
            "\n{} × {} did not run: {}",
            cell.recipe.name(),
            cell.fault.name(),
            cell.note.as_deref().unwrap_or("no reason given")
        );
    }
    if report.broken.is_empty() {
        let _ = writeln!(out, "\nno promise broken");
    } else {
        let _ = writeln!(out, "\n{} cells broke a promise:\n", report.broken.len());
        out.push_str(&report::text(&Report {
            workers: report.workers,
            duration_ms: report.duration_ms,
            lease_ms: report.broken[0].lease_ms,
            cells: report.broken.clone(),
            promises_kept: false,
        }));
    }
    out
}

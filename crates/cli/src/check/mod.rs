//! `redlatch check`: the safety lab. Runs lock recipes, from the seeds'
//! broken ones to redlatch's own lock, with several worker processes
//! incrementing a shared counter, injects faults, and reports which
//! recipes kept mutual exclusion, lost updates, accepted stale writes or
//! stopped anyone from acquiring. `docs/SAFETY.md` explains the table.

mod args;
mod caption;
mod checker;
mod clock;
mod deadlock;
mod event;
mod fault;
mod faults;
mod holds;
mod html;
mod judge;
mod picture;
mod points;
mod progress;
mod random;
mod recipes;
mod report;
mod resource;
mod soak;
mod svg;
mod verdict;
mod workload;

pub use args::{CheckArgs, EXIT_TABLE};
pub use workload::worker::{WorkerArgs, worker};

use crate::exit::{self, Failure};
use args::PROMISE_BROKEN;
use fault::Fault;
use judge::{millis, run_cell};
use recipes::RecipeName;
use report::Report;
use verdict::Status;

/// Runs the lab; blocking (it sleeps between fault injections).
pub fn check(json: bool, args: CheckArgs) -> Result<u8, Failure> {
    let program = std::env::current_exe().map_err(|error| {
        Failure::new(exit::SOFTWARE, format!("cannot find this program: {error}"))
    })?;
    if args.deadlock {
        return deadlock::deadlock(json, &args);
    }
    if let Some(sections) = args.soak {
        return soak::soak(json, &program, sections, &args);
    }
    let recipes = if args.recipes.is_empty() {
        RecipeName::DEFAULT.to_vec()
    } else {
        dedup(args.recipes.clone())
    };
    let faults = if args.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        dedup(args.faults.clone())
    };
    let total = recipes.len() * faults.len();
    let progress = progress::Progress::new(total, !json);
    let mut cells = Vec::new();
    for recipe in &recipes {
        for fault in &faults {
            let index = cells.len();
            let label = format!("{} × {}", recipe.name(), fault.name());
            let setup = args.setup(&program, *recipe, *fault);
            cells.push(run_cell(&setup, &|fraction| {
                progress.at(index, fraction, &label)
            }));
        }
    }
    progress.finish();
    let promises_kept = !cells.iter().any(|cell| cell.status == Status::Broken);
    let failed = cells.iter().any(|cell| cell.status == Status::Error);
    let report = Report {
        workers: args.workers,
        duration_ms: millis(args.duration),
        lease_ms: millis(args.lease),
        cells,
        promises_kept,
    };
    let text = if json {
        crate::output::json(&report)?
    } else {
        report::text(&report)
    };
    if let Some(path) = &args.svg {
        write_file(path, &svg::render(&report))?;
    }
    if let Some(path) = &args.html {
        write_file(path, &html::render(&report))?;
    }
    crate::output::emit(&text)?;
    Ok(if !promises_kept {
        PROMISE_BROKEN
    } else if failed {
        exit::UNAVAILABLE
    } else {
        0
    })
}

fn write_file(path: &std::path::Path, contents: &str) -> Result<(), Failure> {
    std::fs::write(path, contents).map_err(|error| {
        Failure::new(
            exit::UNAVAILABLE,
            format!("cannot write {}: {error}", path.display()),
        )
    })
}

/// `items` without repeats, in first-seen order.
fn dedup<T: PartialEq + Copy>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

//! `redlatch check`: the safety lab. Runs lock recipes, from the seeds'
//! broken ones to redlatch's own lock, with several worker processes
//! incrementing a shared counter, injects faults, and reports which
//! recipes kept mutual exclusion, lost updates, accepted stale writes or
//! stopped anyone from acquiring. `docs/SAFETY.md` explains the table.

mod caption;
mod checker;
mod clock;
mod event;
mod faults;
mod holds;
mod html;
mod picture;
mod progress;
mod random;
mod recipes;
mod report;
mod resource;
mod soak;
mod svg;
mod verdict;
mod workload;

use std::time::Duration;

pub use workload::worker::{WorkerArgs, worker};

use crate::exit::{self, Failure};
use faults::Fault;
use recipes::RecipeName;
use report::{Cell, Report};
use verdict::Status;
use workload::cell::{self as cell_run, Setup};

/// Exit status when a recipe broke a promise it documents.
pub const PROMISE_BROKEN: u8 = 1;

/// The exit statuses of `redlatch check`, for its `--help`.
pub const EXIT_TABLE: &str = "\
Exit status:
  0   every recipe kept what it promises (broken recipes failing is expected)
  1   a recipe broke a promise it documents (BROKEN in the table)
  64  usage error
  69  a run could not take place (redis-server or a worker did not start)
  70  internal error (please report it)";

/// Options of `redlatch check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Recipe to run; repeat for several (default: all)
    #[arg(long = "recipe", value_name = "R")]
    recipes: Vec<RecipeName>,

    /// Fault to inject; repeat for several (default: all)
    #[arg(long = "fault", value_name = "F")]
    faults: Vec<Fault>,

    /// Worker processes contending for the lock
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    workers: u32,

    /// Length of each run (recipe × fault)
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = parse_duration)]
    duration: Duration,

    /// Lease every recipe uses; faults are timed in leases
    #[arg(long, value_name = "DUR", default_value = "500ms", value_parser = parse_lease)]
    lease: Duration,

    /// Also draw every counter-example's timeline into FILE (SVG)
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,

    /// Also write the whole report into FILE as one self-contained HTML
    /// page: the table, and every counter-example drawn with a caption
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,

    /// Soak instead of the table: run cells of a random fault mix until N
    /// critical sections are done (default recipe: redlatch-fenced; default
    /// faults: those the recipe promises safety under)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    soak: Option<u64>,

    /// The soak's seed: the same seed runs the same fault mix (default: random, printed)
    #[arg(long, value_name = "S", requires = "soak")]
    seed: Option<u64>,

    /// Longest wait between a section's read and its write
    #[arg(long, value_name = "DUR", default_value = "20ms", value_parser = parse_think)]
    think: Duration,
}

impl CheckArgs {
    /// One cell's set-up: some faults need a longer lease or run.
    fn setup(&self, program: &std::path::Path, recipe: RecipeName, fault: Fault) -> Setup {
        Setup {
            program: program.to_path_buf(),
            recipe,
            fault,
            workers: self.workers,
            duration: self.duration.max(fault.duration_floor()),
            lease: self.lease.max(fault.lease_floor()),
            think: self.think,
        }
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if duration < Duration::from_millis(500) || duration > Duration::from_secs(3600) {
        return Err("a run lasts from 500ms to 1h".to_owned());
    }
    Ok(duration)
}

fn parse_think(text: &str) -> Result<Duration, String> {
    let think = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if think > Duration::from_secs(1) {
        return Err("the wait inside a section goes from 0ms to 1s".to_owned());
    }
    Ok(think)
}

fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if lease < Duration::from_millis(100) || lease > Duration::from_secs(60) {
        return Err("the lab's lease goes from 100ms to 60s".to_owned());
    }
    Ok(lease)
}

/// Runs the lab; blocking (it sleeps between fault injections).
pub fn check(json: bool, args: CheckArgs) -> Result<u8, Failure> {
    let program = std::env::current_exe().map_err(|error| {
        Failure::new(exit::SOFTWARE, format!("cannot find this program: {error}"))
    })?;
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

/// Runs one recipe under one fault and judges it.
fn run_cell(setup: &Setup, progress: &dyn Fn(f64)) -> Cell {
    let info = setup.recipe.info();
    let promised = (info.promises)(setup.fault);
    let mut cell = Cell {
        recipe: setup.recipe,
        fault: setup.fault,
        status: Status::NotApplicable,
        promised,
        lease_ms: millis(setup.lease),
        duration_ms: millis(setup.duration),
        note: None,
        findings: None,
    };
    if let Err(why) = setup.fault.applies(&info) {
        cell.note = Some(why.to_owned());
        return cell;
    }
    match cell_run::run(setup, progress) {
        Ok(run) => {
            let stuck_after =
                setup.lease * 3 + setup.fault.outage(setup.lease) + Duration::from_secs(1);
            let findings = checker::check(&run, stuck_after, setup.lease);
            cell.status = verdict::judge(promised, &findings);
            cell.findings = Some(findings);
        }
        Err(reason) => {
            // A machine without libfaketime cannot run the cell at all.
            cell.status = if setup.fault.kind().needs().clock {
                Status::Unavailable
            } else {
                Status::Error
            };
            cell.note = Some(reason);
        }
    }
    cell
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
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

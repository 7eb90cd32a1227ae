//! The options of `redlatch check` and the exit statuses its `--help`
//! lists; below the table and the soak, which both read them.

use std::time::Duration;

use super::fault::Fault;
use super::recipes::RecipeName;
use super::workload::cell::Setup;

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
    pub recipes: Vec<RecipeName>,

    /// Fault to inject; repeat for several (default: all)
    #[arg(long = "fault", value_name = "F")]
    pub faults: Vec<Fault>,

    /// Worker processes contending for the lock
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub workers: u32,

    /// Length of each run (recipe × fault)
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Lease every recipe uses; faults are timed in leases
    #[arg(long, value_name = "DUR", default_value = "500ms", value_parser = parse_lease)]
    pub lease: Duration,

    /// Also draw every counter-example's timeline into FILE (SVG)
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,

    /// Also write the whole report into FILE as one self-contained HTML
    /// page: the table, and every counter-example drawn with a caption
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,

    /// Soak instead of the table: run cells of a random fault mix until N
    /// critical sections are done (default recipe: redlatch-fenced; default
    /// faults: those the recipe promises safety under)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub soak: Option<u64>,

    /// The deadlock scenario instead of the table: two workers lock two
    /// names in opposite orders; how long the cycle lasts with redlatch's
    /// deadlock detection, without it (waiting --duration at most, or with
    /// no limit), and with the seeds' SET NX PX and its fixed --lease
    #[arg(long, conflicts_with_all = ["soak", "recipes", "faults"])]
    pub deadlock: bool,

    /// The soak's seed: the same seed runs the same fault mix (default: random, printed)
    #[arg(long, value_name = "S", requires = "soak")]
    pub seed: Option<u64>,

    /// Longest wait between a section's read and its write
    #[arg(long, value_name = "DUR", default_value = "20ms", value_parser = parse_think)]
    pub think: Duration,
}

impl CheckArgs {
    /// One cell's set-up: some faults need a longer lease or run.
    pub fn setup(&self, program: &std::path::Path, recipe: RecipeName, fault: Fault) -> Setup {
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

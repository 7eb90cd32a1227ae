//! `redlatch-bench`: redlatch beside rslock, redlock and the redis-benchmark
//! limit, in one run on one machine. See docs/BENCHMARKS.md for the figures
//! and `redlatch-bench --help` for the options.

mod alloc;
mod clock;
mod contender;
mod contention;
mod eviction;
mod growth;
mod handoff;
mod harness;
mod held;
mod limit;
mod loss;
mod machine;
mod point;
mod procs;
mod redis_info;
mod redlock_latency;
mod report;
mod scale;
mod stats;
mod uncontended;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use testkit::RedisServer;

use crate::harness::{Bench, Settings};
use crate::report::Section;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

/// Where `--write-docs` puts the tables: between these markers of docs/BENCHMARKS.md.
const DOCS_BEGIN: &str = "<!-- redlatch-bench:begin -->";
const DOCS_END: &str = "<!-- redlatch-bench:end -->";

/// Benchmarks redlatch beside rslock, redlock, a raw SET NX PX recipe and
/// redis-benchmark running redlatch's own scripts, against throwaway
/// redis-server processes (testkit, free ports). Prints Markdown tables:
/// medians over the runs with min..max, and ratios taken inside each run.
#[derive(Debug, Parser)]
#[command(name = "redlatch-bench", version)]
struct Cli {
    /// Short windows and one run: checks the harness, not the figures.
    #[arg(long)]
    quick: bool,
    /// Measures to run (1-9, repeatable); all by default.
    #[arg(long = "measure", value_parser = clap::value_parser!(u8).range(1..=9))]
    measures: Vec<u8>,
    /// Runs per figure (medians across runs) [default: 3, --quick: 1].
    #[arg(long)]
    runs: Option<usize>,
    /// Window of each uncontended point, seconds [default: 2, --quick: 0.3].
    #[arg(long)]
    seconds: Option<f64>,
    /// Window of each contended point, seconds [default: 3, --quick: 0.5].
    #[arg(long)]
    contend_seconds: Option<f64>,
    /// Window of the headline 16-waiter contention point (measure 2), seconds
    /// [default: 10, --quick: 1].
    #[arg(long)]
    headline_seconds: Option<f64>,
    /// Locks held by one client in measure 9 [default: 100000, --quick: 10000].
    #[arg(long)]
    held: Option<usize>,
    /// Lease of the locks of measure 9, seconds (renewed every third) [default: 3].
    #[arg(long)]
    held_lease: Option<f64>,
    /// Measure 9 with the loss watch off (`watch_holds(false)`): what the
    /// watch costs while renewing.
    #[arg(long)]
    held_no_watch: bool,
    /// Print the sections as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
    /// Also write the Markdown between the markers of docs/BENCHMARKS.md.
    #[arg(long)]
    write_docs: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A client process of a multi-process measure (started by the harness).
    #[command(hide = true)]
    Worker(procs::WorkerArgs),
}

fn main() {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("build the tokio runtime");
    if let Some(Command::Worker(args)) = cli.command {
        if let Err(message) = runtime.block_on(procs::worker_main(args)) {
            eprintln!("worker: {message}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(message) = runtime.block_on(run(cli)) {
        eprintln!("redlatch-bench: {message}");
        std::process::exit(1);
    }
}

fn seconds(value: Option<f64>, full: f64, quick: f64, is_quick: bool) -> Result<Duration, String> {
    let value = value.unwrap_or(if is_quick { quick } else { full });
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{value} is not a positive number of seconds"))
}

async fn run(cli: Cli) -> Result<(), String> {
    let settings = Settings {
        runs: cli.runs.unwrap_or(if cli.quick { 1 } else { 3 }).max(1),
        window: seconds(cli.seconds, 2.0, 0.3, cli.quick)?,
        contend_window: seconds(cli.contend_seconds, 3.0, 0.5, cli.quick)?,
        headline_window: seconds(cli.headline_seconds, 10.0, 1.0, cli.quick)?,
        held: cli
            .held
            .unwrap_or(if cli.quick { 10_000 } else { 100_000 })
            .max(1),
        held_lease: seconds(cli.held_lease, 3.0, 3.0, cli.quick)?,
        held_watch: !cli.held_no_watch,
        quick: cli.quick,
    };
    let measures: Vec<u8> = if cli.measures.is_empty() {
        (1..=9).collect()
    } else {
        cli.measures.clone()
    };
    let server = RedisServer::start().map_err(|error| format!("start redis-server: {error}"))?;
    let bench = Bench { settings, server };
    let started = std::time::Instant::now();
    let mut sections = vec![machine::describe(&bench, &measures).await];
    for measure in measures {
        eprintln!("measure {measure}...");
        let measure_started = std::time::Instant::now();
        let mut section = match measure {
            1 => uncontended::measure(&bench).await?,
            2 => contention::measure_one_process(&bench).await?,
            3 => contention::measure_processes(&bench).await?,
            4 => redlock_latency::measure(&bench).await?,
            5 => scale::measure(&bench).await?,
            6 => growth::measure(&bench).await?,
            7 => loss::measure(&bench).await?,
            8 => eviction::measure(&bench).await?,
            _ => held::measure(&bench).await?,
        };
        section.notes.push(format!(
            "Measured in {:.0} s; load average after: {}.",
            measure_started.elapsed().as_secs_f64(),
            machine::load_average()
        ));
        if !cli.json {
            print!("{}", section.markdown());
        }
        sections.push(section);
    }
    let total = started.elapsed().as_secs_f64();
    eprintln!("done in {total:.0} s");
    if cli.json {
        let json = serde_json::to_string_pretty(&sections).map_err(|error| error.to_string())?;
        println!("{json}");
    } else {
        println!("Whole run: {total:.0} s.");
    }
    if cli.write_docs {
        write_docs(&sections, total)?;
    }
    Ok(())
}

fn write_docs(sections: &[Section], total_s: f64) -> Result<(), String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/BENCHMARKS.md");
    let document = std::fs::read_to_string(&path)
        .map_err(|error| format!("read {}: {error}", path.display()))?;
    let mut body: String = sections.iter().map(Section::markdown).collect();
    body.push_str(&format!("Whole run: {total_s:.0} s.\n"));
    let updated = report::splice(&document, DOCS_BEGIN, DOCS_END, &body)?;
    std::fs::write(&path, updated).map_err(|error| format!("write {}: {error}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

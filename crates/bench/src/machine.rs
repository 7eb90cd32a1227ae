//! The first section: machine, versions, command, settings.

use std::process::Command;

use crate::harness::Bench;
use crate::report::{Section, Table};

/// Versions of the peers, as pinned in crates/bench/Cargo.toml.
const RSLOCK_VERSION: &str = "0.10";
const REDLOCK_VERSION: &str = "2.0";

pub async fn describe(bench: &Bench, measures: &[u8]) -> Section {
    let settings = &bench.settings;
    let mut section = Section::new(
        "Machine and settings",
        "Every figure below is the median over the runs with (min..max) across runs; \
         ratios are taken inside each run, then their median is shown.",
    );
    let mut table = Table::new(&["what", "value"]);
    table.numeric = vec![false, false];
    let mut row = |what: &str, value: String| table.row(vec![what.to_owned(), value]);
    row("date (UTC)", shell("date", &["-u", "+%Y-%m-%d %H:%M"]));
    row("CPU", cpu_model());
    row(
        "cores",
        std::thread::available_parallelism().map_or("?".into(), |n| n.to_string()),
    );
    row("load average at start (1/5/15 min)", load_average());
    row(
        "redis-server",
        redis_version(bench)
            .await
            .unwrap_or_else(|| "unknown".into()),
    );
    row("redis-benchmark", shell("redis-benchmark", &["--version"]));
    row("rustc", shell("rustc", &["--version"]));
    row(
        "redlatch",
        format!(
            "{} (commit {})",
            env!("CARGO_PKG_VERSION"),
            shell(
                "git",
                &[
                    "-C",
                    env!("CARGO_MANIFEST_DIR"),
                    "rev-parse",
                    "--short",
                    "HEAD"
                ]
            )
        ),
    );
    row(
        "rslock / redlock",
        format!("{RSLOCK_VERSION} / {REDLOCK_VERSION}"),
    );
    row(
        "command",
        format!(
            "`redlatch-bench {}`",
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        ),
    );
    row(
        "windows",
        format!(
            "{} runs; {:.1} s per uncontended point, {:.1} s per contended point, {:.1} s for the headline 16-waiter point",
            settings.runs,
            settings.window.as_secs_f64(),
            settings.contend_window.as_secs_f64(),
            settings.headline_window.as_secs_f64()
        ),
    );
    row(
        "measures",
        measures
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    row(
        "client runtime",
        "tokio multi-thread, one worker per core, every client process on the same machine as redis-server".into(),
    );
    section.tables.push(table);
    section
}

fn shell(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1/5/15-minute load averages: how busy the shared machine was.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

async fn redis_version(bench: &Bench) -> Option<String> {
    let mut conn = crate::contender::admin_connection(&bench.server)
        .await
        .ok()?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_owned())
}

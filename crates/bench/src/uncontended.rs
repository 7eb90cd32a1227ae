//! Measure 1: uncontended acquire+release cycles/s on distinct keys, 1, 16
//! and 64 tasks on one client, beside the peers, the raw recipe and
//! redis-benchmark running redlatch's scripts.

use std::collections::BTreeMap;

use crate::contender::Kind;
use crate::harness::Bench;
use crate::limit::{self, Scripts};
use crate::point;
use crate::redis_info::Work;
use crate::report::{Section, Table};
use crate::stats::Summary;

const TASKS: [u32; 3] = [1, 16, 64];
const KINDS: [Kind; 7] = [
    Kind::Redlatch,
    Kind::RedlatchEvalsha,
    Kind::Token,
    Kind::Rslock,
    Kind::Redlock,
    Kind::Raw,
    Kind::Pings,
];
/// Goal: redlatch at least this share of the limit at 64 tasks.
const GOAL_SHARE_OF_LIMIT: f64 = 0.6;
/// Goal (issue 38): the token lock's Redis CPU per uncontended cycle at
/// most this share of rslock's, on a server with `DELIFEQ` (or `DELEX`).
const GOAL_TOKEN_CPU_SHARE: f64 = 0.5;

/// Column names of the limit.
const LIMIT: &str = "limit: redis-benchmark -c T (T connections)";
const LIMIT_P: &str = "limit: redis-benchmark -c 1 -P T (one connection, T pipelined)";

pub async fn measure(bench: &Bench) -> Result<Section, String> {
    let url = bench.url();
    let seconds = bench.settings.window.as_secs_f64();
    let mut conn = crate::contender::admin_connection(&bench.server).await?;
    let scripts = Scripts::load(&mut conn).await?;
    // figures[tasks][column] = one value per run
    let mut figures: BTreeMap<u32, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    // cpu[tasks][column] = redis-server CPU µs per cycle, one value per run
    let mut cpu: BTreeMap<u32, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    // allocs[tasks][column] = client heap allocations per cycle, one value per run
    let mut allocs: BTreeMap<u32, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    // work[(tasks, kind)] = the server's work per cycle, one value per run
    let mut work: BTreeMap<(u32, &str), Vec<Work>> = BTreeMap::new();
    let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
    for run in 0..bench.settings.runs {
        for tasks in TASKS {
            eprintln!("  run {} tasks {tasks}", run + 1);
            let row = figures.entry(tasks).or_default();
            let cpu_row = cpu.entry(tasks).or_default();
            let allocs_row = allocs.entry(tasks).or_default();
            for kind in KINDS {
                let point = point::cycles(kind, &url, 1, tasks, bench.settings.window).await?;
                row.entry(kind.label()).or_default().push(point.per_sec);
                cpu_row
                    .entry(kind.label())
                    .or_default()
                    .push(point.server_cpu_us);
                allocs_row
                    .entry(kind.label())
                    .or_default()
                    .push(point.allocations_per_cycle);
                work.entry((tasks, kind.label()))
                    .or_default()
                    .push(point.server_per_cycle);
                *errors.entry(kind.label()).or_default() += point.errors.count;
            }
            let port = bench.server.port();
            let plain = limit::cycles_per_sec(port, &mut conn, &scripts, tasks, 1, seconds).await?;
            row.entry(LIMIT).or_default().push(plain.per_sec);
            cpu_row.entry(LIMIT).or_default().push(plain.server_cpu_us);
            // One connection with T requests in flight: the shape of a
            // multiplexed connection shared by T tasks.
            let piped = limit::cycles_per_sec(port, &mut conn, &scripts, 1, tasks, seconds).await?;
            row.entry(LIMIT_P).or_default().push(piped.per_sec);
            cpu_row
                .entry(LIMIT_P)
                .or_default()
                .push(piped.server_cpu_us);
        }
    }

    let mut section = Section::new(
        "1. Uncontended: acquire+release cycles/s, distinct keys, T tasks on one client",
        format!(
            "Each task loops acquire → release on a key of its own for {:.1} s. redlatch: one \
             `Client`, its scripts called as functions of its library (FCALL); redlatch by \
             EVALSHA: the same with `script_functions(false)`; rslock: one `LockManager` (one multiplexed connection); redlock: one \
             `RedLock` (a new connection per command), each call under `spawn_blocking`; \
             redlatch token lock: one `Client`, `Client::token_lock` (`SET NX PX GET`, released \
             by `DELIFEQ` or `DELEX … IFEQ` where the server has them, by a script elsewhere); raw: \
             `SET NX PX` + Lua compare-and-delete on one redis-rs multiplexed connection. The \
             limit: redis-benchmark sends redlatch's acquire and release scripts by EVALSHA, T \
             requests in flight: on T connections (`-c T`), and pipelined on one connection \
             (`-c 1 -P T`, the shape of one multiplexed connection shared by T tasks); a cycle \
             costs the server one of each, so limit = 1 / (1/acquire_rps + 1/release_rps). \
             Client heap allocations per cycle: the harness's counting allocator, the whole \
             client process over the window (redlock's include its blocking threads).",
            seconds
        ),
    );
    let mut columns = vec!["tasks"];
    columns.extend(KINDS.iter().map(|k| k.label()));
    columns.extend([LIMIT, LIMIT_P]);
    let mut table = Table::new(&columns);
    for (tasks, row) in &figures {
        let mut cells = vec![tasks.to_string()];
        for column in &columns[1..] {
            cells.push(Summary::of(row[column].iter().copied()).show(0));
        }
        table.row(cells);
    }
    section.tables.push(table);

    let mut cpu_headers = vec!["redis-server CPU per cycle (µs), tasks"];
    cpu_headers.extend(&columns[1..]);
    let mut cpu_table = Table::new(&cpu_headers);
    for (tasks, row) in &cpu {
        let mut cells = vec![tasks.to_string()];
        for column in &columns[1..] {
            cells.push(Summary::of(row[column].iter().copied()).show(1));
        }
        cpu_table.row(cells);
    }

    let ratio_columns = [
        ("redlatch ÷ limit", LIMIT),
        ("redlatch ÷ limit -c 1 -P T", LIMIT_P),
        ("redlatch ÷ raw", Kind::Raw.label()),
        ("redlatch ÷ rslock", Kind::Rslock.label()),
        ("redlatch ÷ redlock", Kind::Redlock.label()),
    ];
    let mut headers = vec!["tasks"];
    headers.extend(ratio_columns.iter().map(|(h, _)| *h));
    let mut ratios = Table::new(&headers);
    let ours = Kind::Redlatch.label();
    let mut notes = Vec::new();
    for (tasks, row) in &figures {
        let mut cells = vec![tasks.to_string()];
        for (_, other) in ratio_columns {
            let summary = ratio(&row[ours], &row[other]);
            cells.push(summary.show(2));
            if *tasks == 64 && other == LIMIT {
                notes.push(goal_note(
                    summary.median,
                    "the limit on 64 connections (-c 64)",
                ));
            }
            if *tasks == 64 && other == LIMIT_P {
                notes.push(goal_note(
                    summary.median,
                    "the pipelined limit (-c 1 -P 64), the goal's reference",
                ));
            }
            if (other == Kind::Rslock.label() || other == Kind::Redlock.label())
                && summary.median < 1.0
            {
                notes.push(format!(
                    "At T = {tasks} redlatch is behind {other} ({:.2}×).",
                    summary.median
                ));
            }
        }
        ratios.row(cells);
    }
    section.tables.push(ratios);

    // The token lock beside rslock: throughput and the server's CPU per cycle.
    let token = Kind::Token.label();
    let rslock = Kind::Rslock.label();
    let pings = Kind::Pings.label();
    let mut token_table = Table::new(&[
        "tasks",
        "token lock ÷ rslock, cycles/s",
        "token lock ÷ rslock, server CPU per cycle",
        "two PINGs ÷ rslock, server CPU per cycle (the floor of any two-round-trip cycle)",
        "token lock ÷ rslock, server CPU above the two-PING floor",
    ]);
    for (tasks, row) in &figures {
        let speed = ratio(&row[token], &row[rslock]);
        let cost = ratio(&cpu[tasks][token], &cpu[tasks][rslock]);
        let floor = ratio(&cpu[tasks][pings], &cpu[tasks][rslock]);
        let above = |kind: &str| -> Vec<f64> {
            cpu[tasks][kind]
                .iter()
                .zip(&cpu[tasks][pings])
                .map(|(cost, floor)| cost - floor)
                .collect()
        };
        let above_floor = ratio(&above(token), &above(rslock));
        token_table.row(vec![
            tasks.to_string(),
            speed.show(2),
            cost.show(2),
            floor.show(2),
            above_floor.show(2),
        ]);
        if *tasks == 1 {
            let verdict = if cost.median <= GOAL_TOKEN_CPU_SHARE && speed.median > 1.0 {
                "met"
            } else {
                "not met"
            };
            notes.push(format!(
                "Goal (token lock, 1 task): server CPU per cycle ≤ {GOAL_TOKEN_CPU_SHARE}× rslock's \
                 and more cycles/s: {verdict} ({:.2}× the CPU, {:.2}× the cycles/s).",
                cost.median, speed.median
            ));
            notes.push(format!(
                "Two PINGs, no lock, cost the server {:.2}× rslock's cycle: a cycle of two round \
                 trips cannot cost less. Above that floor the token lock costs {:.2}× what \
                 rslock costs.",
                floor.median, above_floor.median
            ));
        }
    }
    section.tables.push(token_table);
    section.tables.push(cpu_table);
    section.tables.push(work_table(&work));

    let mut alloc_headers = vec!["client heap allocations per cycle, tasks"];
    alloc_headers.extend(KINDS.iter().map(|k| k.label()));
    let mut alloc_table = Table::new(&alloc_headers);
    for (tasks, row) in &allocs {
        let mut cells = vec![tasks.to_string()];
        for kind in KINDS {
            cells.push(Summary::of(row[kind.label()].iter().copied()).show(1));
        }
        alloc_table.row(cells);
    }
    section.tables.push(alloc_table);
    let error_text: Vec<String> = errors
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect();
    notes.push(format!("Errors: {}.", error_text.join(", ")));
    section.notes = notes;
    Ok(section)
}

/// Where the server's CPU per cycle goes, for the kinds whose protocols
/// the token lock's goal compares: commands, reads of client input (each
/// a wake-up with its system calls), the time inside commands, and the
/// rest (reading, parsing, replying, waking).
fn work_table(work: &BTreeMap<(u32, &str), Vec<Work>>) -> Table {
    let mut table = Table::new(&[
        "tasks",
        "kind",
        "commands per cycle",
        "server reads per cycle",
        "µs inside commands",
        "µs outside commands",
        "server CPU µs",
    ]);
    for ((tasks, kind), runs) in work {
        if ![
            Kind::Token,
            Kind::Rslock,
            Kind::Raw,
            Kind::Redlatch,
            Kind::Pings,
        ]
        .iter()
        .any(|k| k.label() == *kind)
        {
            continue;
        }
        let median = |f: &dyn Fn(&Work) -> f64| Summary::of(runs.iter().map(f));
        table.row(vec![
            tasks.to_string(),
            (*kind).to_owned(),
            median(&|w| w.commands).show(2),
            median(&|w| w.reads).show(2),
            median(&|w| w.command_usec).show(2),
            median(&|w| w.cpu * 1e6 - w.command_usec).show(1),
            median(&|w| w.cpu * 1e6).show(1),
        ]);
    }
    table
}

/// Per-run ratio ours/theirs, summarized across runs.
pub fn ratio(ours: &[f64], theirs: &[f64]) -> Summary {
    Summary::of(ours.iter().zip(theirs).map(|(a, b)| a / b))
}

fn goal_note(share: f64, of: &str) -> String {
    let verdict = if share >= GOAL_SHARE_OF_LIMIT {
        "met"
    } else {
        "not met"
    };
    format!("Goal ≥ {GOAL_SHARE_OF_LIMIT}× {of} at 64 tasks: {verdict} ({share:.2}×).")
}

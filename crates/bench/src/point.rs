//! One measurement point: a fresh client (or fresh client processes), a
//! short warm-up, then the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::{now_ns, ns};
use crate::contender::{Kind, Locker};
use crate::handoff::HandoffStats;
use crate::procs::{self, Mode};
use crate::redis_info;
use crate::workload::{self, Errors};

/// Delay between the last setup step and the window, so every task starts together.
const START_DELAY_NS: u64 = 20_000_000;
/// Warm-up before each in-process window: connections open, scripts cached.
const WARMUP: Duration = Duration::from_millis(200);

/// Keys of one point never collide with another's leftovers.
fn fresh_prefix(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("bench:{what}:{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What one uncontended point measured.
pub struct CyclePoint {
    pub per_sec: f64,
    /// redis-server CPU time per completed cycle, µs.
    pub server_cpu_us: f64,
    /// The server's work per completed cycle: commands, reads of client
    /// input, and µs inside commands (the rest of its CPU is reading,
    /// parsing, replying and waking up).
    pub server_per_cycle: redis_info::Work,
    /// Client heap allocations per completed cycle (every client process).
    pub allocations_per_cycle: f64,
    pub errors: Errors,
}

/// Uncontended cycles/s of `tasks` tasks in each of `processes` client
/// processes (1: inside this process), and the errors seen.
pub async fn cycles(
    kind: Kind,
    url: &str,
    processes: u32,
    tasks: u32,
    window: Duration,
) -> Result<CyclePoint, String> {
    let prefix = fresh_prefix("cycles");
    let mut admin = redis_info::connect(url).await?;
    let mut before = redis_info::work(&mut admin).await?;
    let log = if processes == 1 {
        let locker = Locker::connect(kind, &[url.to_owned()]).await?;
        let warm_start = now_ns();
        let warmup = workload::cycles(
            &locker,
            tasks,
            0,
            &prefix,
            warm_start,
            warm_start + ns(WARMUP),
        )
        .await;
        if warmup.cycles == 0 && warmup.errors.count > 0 {
            return Err(format!(
                "{}: warm-up failed: {:?}",
                kind.label(),
                warmup.errors.samples
            ));
        }
        let start = now_ns() + START_DELAY_NS;
        before = redis_info::work(&mut admin).await?;
        workload::cycles(&locker, tasks, 0, &prefix, start, start + ns(window)).await
    } else {
        let (outputs, _, _) = procs::run_workers(
            kind,
            Mode::Cycles,
            url,
            processes,
            tasks,
            &prefix,
            ns(window),
        )
        .await?;
        procs::merge_cycles(outputs)?
    };
    let work = redis_info::work(&mut admin).await? - before;
    let cycles = log.cycles.max(1) as f64;
    Ok(CyclePoint {
        per_sec: log.cycles as f64 / window.as_secs_f64(),
        server_cpu_us: work.cpu * 1e6 / cycles,
        server_per_cycle: redis_info::Work {
            cpu: work.cpu / cycles,
            commands: work.commands / cycles,
            reads: work.reads / cycles,
            command_usec: work.command_usec / cycles,
        },
        allocations_per_cycle: log.allocations as f64 / log.cycles.max(1) as f64,
        errors: log.errors,
    })
}

/// Hand-off figures of `waiters` waiters in each of `processes` client
/// processes, all on one key.
pub async fn contend(
    kind: Kind,
    url: &str,
    processes: u32,
    waiters: u32,
    window: Duration,
) -> Result<HandoffStats, String> {
    let key = fresh_prefix("hot");
    let (log, start, deadline) = if processes == 1 {
        let locker = Locker::connect(kind, &[url.to_owned()]).await?;
        // One acquisition opens the connections before the clock starts.
        let give_up = now_ns() + ns(Duration::from_secs(5));
        if let Some(held) = locker.acquire(&format!("{key}:warm"), give_up).await? {
            locker.release(held).await?;
        }
        let start = now_ns() + START_DELAY_NS;
        let deadline = start + ns(window);
        let log = workload::contend(&locker, waiters, 0, &key, start, deadline).await;
        (log, start, deadline)
    } else {
        let (outputs, start, deadline) = procs::run_workers(
            kind,
            Mode::Contend,
            url,
            processes,
            waiters,
            &key,
            ns(window),
        )
        .await?;
        (procs::merge_contend(outputs)?, start, deadline)
    };
    if !log.errors.samples.is_empty() {
        eprintln!("  {} errors: {:?}", kind.label(), log.errors.samples);
    }
    Ok(HandoffStats::of(&log, processes * waiters, start, deadline))
}

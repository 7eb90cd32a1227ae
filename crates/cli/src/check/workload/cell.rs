//! One cell of the table: a recipe under a fault, for a while, with its
//! own throwaway lock server and store.

use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit::RedisServer;

use super::failover::SentinelLock;
use super::lab::Lab;
use super::links::Links;
use super::lock_server::LockServer;
use super::procs::{Spec, Worker};
use crate::check::clock::now_ns;
use crate::check::event::{Event, What};
use crate::check::fault::Fault;
use crate::check::recipes::RecipeName;

/// What a cell is run with.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The binary workers re-execute (this one).
    pub program: PathBuf,
    /// The recipe.
    pub recipe: RecipeName,
    /// The fault.
    pub fault: Fault,
    /// Worker processes running at once.
    pub workers: u32,
    /// How long the run lasts once every worker is ready.
    pub duration: Duration,
    /// The lease every recipe uses.
    pub lease: Duration,
    /// Longest wait between a section's read and its write.
    pub think: Duration,
}

/// Everything that happened in a run.
#[derive(Debug)]
pub struct Run {
    /// Every event, workers' and the lab's, sorted by time.
    pub events: Vec<Event>,
    /// When the run started (all workers ready), monotonic ns.
    pub start: u64,
    /// When the run ended (workers told to stop), monotonic ns.
    pub end: u64,
    /// When each injection took effect, monotonic ns: for faults a worker
    /// does to itself, when the lab paused or killed it at its point (arming
    /// it is not enough: it stops only when it next gets there).
    pub injections: Vec<u64>,
}

/// First injection, after the run starts: workers are in their stride.
const FIRST_INJECTION: Duration = Duration::from_millis(300);
/// How often the lab looks at its workers.
const TICK: Duration = Duration::from_millis(2);
/// Longest wait for the workers to connect.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs one cell; `progress` is told the fraction of the run done.
///
/// # Errors
/// `Err` when the run could not take place (a server or worker would not
/// start); the message says why.
pub fn run(setup: &Setup, progress: &dyn Fn(f64)) -> Result<Run, String> {
    let dir = tempfile::Builder::new()
        .prefix("redlatch-check-")
        .tempdir()
        .map_err(|error| error.to_string())?;
    let info = setup.recipe.info();
    let fault = setup.fault.kind();
    let needs = fault.needs();
    let lock = LockServer::start(info.servers, needs.clock, dir.path())?;
    let resource = RedisServer::start().map_err(|error| format!("store: {error}"))?;
    let sentinel = if needs.sentinel {
        Some(SentinelLock::start()?)
    } else {
        None
    };
    let spec = Spec {
        program: setup.program.clone(),
        recipe: setup.recipe,
        lock_urls: sentinel
            .as_ref()
            .map_or_else(|| lock.urls(), SentinelLock::urls),
        sentinel_master: sentinel
            .as_ref()
            .map(|_| SentinelLock::master_name().to_owned()),
        resource_url: resource.url(),
        lease_ms: u64::try_from(setup.lease.as_millis()).unwrap_or(u64::MAX),
        point: fault.point(info.pause_point),
        dir: dir.path().to_path_buf(),
        think_ms: u64::try_from(setup.think.as_millis()).unwrap_or(u64::MAX),
    };
    let links = if needs.proxies {
        Links::new(lock.addrs())
    } else {
        Links::default()
    };
    let mut lab = Lab::new(
        setup.fault.name(),
        setup.lease,
        spec.clone(),
        setup.workers,
        lock,
        sentinel,
        links,
    );
    fault.prepare(&mut lab);
    for id in 1..=setup.workers {
        lab.start_worker(id)?;
    }
    wait_ready(&mut lab.workers, &spec)?;

    let start = now_ns();
    let began = Instant::now();
    let ends = began + setup.duration;
    let mut next_injection = began + FIRST_INJECTION;
    let applies = setup.fault.applies(&info).is_ok();
    while Instant::now() < ends {
        let now = Instant::now();
        if applies
            && now >= next_injection
            && !lab.busy()
            && (!fault.once() || lab.injection_count() == 0)
        {
            next_injection = now + setup.fault.period(setup.lease);
            fault.inject(&mut lab)?;
        }
        // Act on workers that stopped themselves at the fault's point.
        for index in 0..lab.workers.len() {
            let worker = &lab.workers[index];
            if !worker.gone && !worker.held_by_lab && worker.is_stopped() {
                fault.on_stopped(&mut lab, index)?;
            }
        }
        fault.watch(&mut lab)?;
        lab.start_replacements()?;
        lab.run_due(Instant::now())?;
        progress(began.elapsed().as_secs_f64() / setup.duration.as_secs_f64());
        sleep(TICK);
    }

    // Wind down: undo what is pending, then ask every worker to stop.
    let end = now_ns();
    lab.wind_down()?;
    if let Some(what) = lab.lock.describe_key() {
        lab.push_event(Event {
            t: end,
            w: None,
            what: What::Fault { what },
        });
    }
    let (mut events, injections, mut workers) = lab.finish();
    for worker in &mut workers {
        worker.signal(Signal::SIGCONT);
        worker.signal(Signal::SIGTERM);
    }
    let deadline = Instant::now() + setup.lease * 2 + Duration::from_secs(3);
    while Instant::now() < deadline && !workers.iter_mut().all(Worker::exited) {
        sleep(Duration::from_millis(10));
    }
    for worker in &mut workers {
        worker.kill();
        events.extend(worker.events());
    }
    events.sort_by_key(|event| event.t);
    Ok(Run {
        events,
        start,
        end,
        injections,
    })
}

/// Waits until every worker has connected and logged `ready`.
fn wait_ready(workers: &mut [Worker], spec: &Spec) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        for worker in workers.iter_mut() {
            if worker.exited() {
                return Err(format!(
                    "worker {} exited at start: {}",
                    worker.id,
                    worker.stderr_tail(&spec.dir)
                ));
            }
        }
        if workers.iter().all(Worker::is_ready) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("workers did not connect within 30 s".to_owned());
        }
        sleep(Duration::from_millis(10));
    }
}

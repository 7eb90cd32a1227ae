//! One cell of the table: a recipe under a fault, for a while, with its
//! own throwaway lock server and store.

use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit::RedisServer;

use super::inject::{FollowUp, LockServer};
use super::procs::{Spec, Worker};
use crate::check::clock::now_ns;
use crate::check::event::{Event, What};
use crate::check::faults::{Action, Fault};
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
    let mut lock = LockServer::start(info.servers, setup.fault == Fault::ClockJump, dir.path())?;
    let resource = RedisServer::start().map_err(|error| format!("store: {error}"))?;
    let spec = Spec {
        program: setup.program.clone(),
        recipe: setup.recipe,
        lock_urls: lock.urls(),
        resource_url: resource.url(),
        lease_ms: u64::try_from(setup.lease.as_millis()).unwrap_or(u64::MAX),
        point: setup.fault.point(info.pause_point),
        dir: dir.path().to_path_buf(),
    };
    let mut workers = Vec::new();
    for id in 1..=setup.workers {
        workers.push(spec.spawn(id).map_err(|error| format!("worker: {error}"))?);
    }
    wait_ready(&mut workers, &spec)?;

    let mut lab = Vec::new();
    let mut injections = Vec::new();
    let start = now_ns();
    let began = Instant::now();
    let ends = began + setup.duration;
    let mut next_injection = began + FIRST_INJECTION;
    let mut next_id = setup.workers + 1;
    let mut turn = 0usize;
    let mut server_follow_up: Option<(Instant, FollowUp)> = None;
    let mut resumes: Vec<(Instant, u32)> = Vec::new();
    let action = setup.fault.worker_action(setup.lease);

    while Instant::now() < ends {
        let now = Instant::now();
        if setup.fault != Fault::None
            && now >= next_injection
            && server_follow_up.is_none()
            && setup.recipe.applies(setup.fault)
        {
            next_injection = now + setup.fault.period(setup.lease);
            if action.is_some() {
                // Arm the next live worker: it stops itself at the fault's point.
                let live: Vec<usize> = (0..workers.len())
                    .filter(|&index| !workers[index].gone && !workers[index].held_by_lab)
                    .collect();
                if !live.is_empty() {
                    let index = live[turn % live.len()];
                    turn += 1;
                    workers[index].signal(Signal::SIGUSR1);
                }
            } else {
                let injected = Event::now(
                    None,
                    What::Fault {
                        what: setup.fault.name().to_owned(),
                    },
                );
                injections.push(injected.t);
                lab.push(injected);
                let follow_up = lock.inject(setup.fault, setup.lease)?;
                match follow_up {
                    FollowUp::Done => {}
                    FollowUp::Resume(after) | FollowUp::Restart(after) => {
                        server_follow_up = Some((now + after, follow_up));
                    }
                }
            }
        }
        if let Some((due, follow_up)) = &server_follow_up
            && Instant::now() >= *due
        {
            lock.follow_up(follow_up)?;
            let what = match follow_up {
                FollowUp::Resume(_) => "redis resumed",
                _ => "redis restarted empty",
            };
            lab.push(Event::now(
                None,
                What::Fault {
                    what: what.to_owned(),
                },
            ));
            server_follow_up = None;
        }
        // Act on workers that stopped themselves.
        let mut replacements = Vec::new();
        for worker in &mut workers {
            if worker.gone || worker.held_by_lab || !worker.is_stopped() {
                continue;
            }
            match action {
                Some(Action::ResumeAfter(after)) => {
                    let paused = Event::now(None, What::Paused { worker: worker.id });
                    injections.push(paused.t);
                    lab.push(paused);
                    worker.held_by_lab = true;
                    resumes.push((Instant::now() + after, worker.id));
                }
                Some(Action::Kill) => {
                    worker.kill();
                    let killed = Event::now(None, What::Killed { worker: worker.id });
                    injections.push(killed.t);
                    lab.push(killed);
                    replacements.push(next_id);
                    next_id += 1;
                }
                None => worker.signal(Signal::SIGCONT),
            }
        }
        for id in replacements {
            workers.push(spec.spawn(id).map_err(|error| format!("worker: {error}"))?);
        }
        resume_due(&mut workers, &mut resumes, &mut lab, Instant::now());
        progress(began.elapsed().as_secs_f64() / setup.duration.as_secs_f64());
        sleep(TICK);
    }

    // Wind down: undo what is pending, then ask every worker to stop.
    let end = now_ns();
    if let Some((_, follow_up)) = &server_follow_up {
        lock.follow_up(follow_up)?;
    }
    if let Some(what) = lock.describe_key() {
        lab.push(Event {
            t: end,
            w: None,
            what: What::Fault { what },
        });
    }
    resume_due(
        &mut workers,
        &mut resumes,
        &mut lab,
        Instant::now() + Duration::from_secs(3600),
    );
    for worker in &mut workers {
        worker.signal(Signal::SIGCONT);
        worker.signal(Signal::SIGTERM);
    }
    let deadline = Instant::now() + setup.lease * 2 + Duration::from_secs(3);
    while Instant::now() < deadline && !workers.iter_mut().all(Worker::exited) {
        sleep(Duration::from_millis(10));
    }
    let mut events = lab;
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

/// Sends SIGCONT to paused workers whose pause is over by `now`.
fn resume_due(
    workers: &mut [Worker],
    resumes: &mut Vec<(Instant, u32)>,
    lab: &mut Vec<Event>,
    now: Instant,
) {
    resumes.retain(|&(due, id)| {
        if due > now {
            return true;
        }
        if let Some(worker) = workers.iter_mut().find(|worker| worker.id == id) {
            worker.signal(Signal::SIGCONT);
            worker.held_by_lab = false;
            lab.push(Event::now(None, What::Resumed { worker: id }));
        }
        false
    });
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

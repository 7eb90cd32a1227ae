//! One cell of the table: a recipe under a fault, for a while, with its
//! own throwaway lock server and store.

use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit::RedisServer;

use super::failover::SentinelLock;
use super::inject::{FollowUp, LockServer};
use super::links::{Links, SLOW};
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
    let mut lock = LockServer::start(info.servers, setup.fault == Fault::ClockJump, dir.path())?;
    let resource = RedisServer::start().map_err(|error| format!("store: {error}"))?;
    let mut sentinel = if setup.fault == Fault::Failover {
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
        point: setup.fault.point(info.pause_point),
        dir: dir.path().to_path_buf(),
        think_ms: u64::try_from(setup.think.as_millis()).unwrap_or(u64::MAX),
    };
    let mut links = if setup.fault.uses_proxies() {
        Links::new(lock.addrs())
    } else {
        Links::default()
    };
    if matches!(setup.fault, Fault::RestartMaster | Fault::RestartMasterLate) {
        for id in 1..=setup.workers {
            links.keep_apart(id, unreachable_masters(id, info.servers));
        }
    }
    let mut workers = Vec::new();
    for id in 1..=setup.workers {
        workers.push(start_worker(&spec, &mut links, id)?);
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
    let mut heals: Vec<(Instant, u32)> = Vec::new();
    let action = setup.fault.worker_action(setup.lease);

    while Instant::now() < ends {
        let now = Instant::now();
        if setup.fault != Fault::None
            && now >= next_injection
            && server_follow_up.is_none()
            && heals.is_empty()
            && (!setup.fault.once() || injections.is_empty())
            && setup.recipe.applies(setup.fault)
        {
            next_injection = now + setup.fault.period(setup.lease);
            if action.is_some() {
                // Arm the next live worker: it stops itself at the fault's point.
                let live: Vec<usize> = (0..workers.len())
                    .filter(|&index| !workers[index].gone && !workers[index].held_by_lab)
                    .collect();
                if !live.is_empty() {
                    if let Some(sentinel) = &sentinel {
                        // What the master grants from now on is not replicated.
                        sentinel.break_replication()?;
                        lab.push(Event::now(
                            None,
                            What::Fault {
                                what: "breaks the master's replication link".to_owned(),
                            },
                        ));
                    }
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
                if setup.fault == Fault::Latency {
                    links.set_all(SLOW);
                }
                let follow_up = lock.inject(setup.fault, setup.lease)?;
                match follow_up {
                    FollowUp::Done => {}
                    FollowUp::Resume(after)
                    | FollowUp::Restart(after)
                    | FollowUp::RestartMaster(_, after) => {
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
                FollowUp::Resume(_) => "redis resumed".to_owned(),
                FollowUp::RestartMaster(index, _) => format!("master {index} restarted empty"),
                _ => "redis restarted empty".to_owned(),
            };
            lab.push(Event::now(None, What::Fault { what }));
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
                Some(action @ (Action::CutOff(after) | Action::CutReplies(after))) => {
                    let what = if matches!(action, Action::CutOff(_)) {
                        links.cut_off(worker.id);
                        format!("cuts w{} off from the lock servers", worker.id)
                    } else {
                        links.cut_replies(worker.id);
                        format!(
                            "drops the lock servers' replies to w{} (its requests still arrive)",
                            worker.id
                        )
                    };
                    let cut = Event::now(None, What::Fault { what });
                    injections.push(cut.t);
                    lab.push(cut);
                    worker.held_by_lab = true;
                    heals.push((Instant::now() + after, worker.id));
                    worker.signal(Signal::SIGCONT);
                }
                Some(Action::RestartShared(outage)) => {
                    let master = shared_master(worker.id, setup.workers, info.servers);
                    let follow_up = lock.restart_master(master, outage)?;
                    let restarted = Event::now(
                        None,
                        What::Fault {
                            what: if outage.is_zero() {
                                format!("restarts master {master} (held by w{}) empty", worker.id)
                            } else {
                                format!("kills master {master} (held by w{})", worker.id)
                            },
                        },
                    );
                    injections.push(restarted.t);
                    lab.push(restarted);
                    if let FollowUp::RestartMaster(_, after) = follow_up {
                        server_follow_up = Some((Instant::now() + after, follow_up));
                    }
                    worker.signal(Signal::SIGCONT);
                }
                Some(Action::KillMaster) => {
                    let sentinel = sentinel.as_mut().ok_or("no Sentinel group")?;
                    if sentinel.master_killed() {
                        worker.signal(Signal::SIGCONT);
                        continue;
                    }
                    let port = sentinel.kill_master()?;
                    let killed = Event::now(
                        None,
                        What::Fault {
                            what: format!(
                                "kill -9 the master (port {port}): w{}'s grant is not replicated",
                                worker.id
                            ),
                        },
                    );
                    injections.push(killed.t);
                    lab.push(killed);
                    worker.signal(Signal::SIGCONT);
                }
                None => worker.signal(Signal::SIGCONT),
            }
        }
        if let Some(group) = sentinel.as_mut()
            && group.broken_for(Duration::from_secs(1))
        {
            let port = group.kill_master()?;
            let killed = Event::now(
                None,
                What::Fault {
                    what: format!(
                        "kill -9 the master (port {port}): nobody got the lock in the 1 s since replication broke"
                    ),
                },
            );
            injections.push(killed.t);
            lab.push(killed);
        }
        if let Some((port, has_lock)) = sentinel.as_mut().and_then(SentinelLock::promoted) {
            lab.push(Event::now(
                None,
                What::Fault {
                    what: format!(
                        "sees Sentinel promoted the replica (port {port}); {}",
                        if has_lock {
                            "it has the lock key"
                        } else {
                            "it has no lock key"
                        }
                    ),
                },
            ));
        }
        for id in replacements {
            workers.push(start_worker(&spec, &mut links, id)?);
        }
        heals.retain(|&(due, id)| {
            if due > Instant::now() {
                return true;
            }
            links.heal(id);
            if let Some(worker) = workers.iter_mut().find(|worker| worker.id == id) {
                worker.held_by_lab = false;
            }
            lab.push(Event::now(
                None,
                What::Fault {
                    what: format!("heals w{id}'s links"),
                },
            ));
            false
        });
        resume_due(&mut workers, &mut resumes, &mut lab, Instant::now());
        progress(began.elapsed().as_secs_f64() / setup.duration.as_secs_f64());
        sleep(TICK);
    }

    // Wind down: undo what is pending, then ask every worker to stop.
    let end = now_ns();
    match &server_follow_up {
        // Bringing a Redlock master back early would break the very rule
        // the run shows; the workers stop without it.
        Some((_, FollowUp::RestartMaster(..))) | None => {}
        Some((_, follow_up)) => lock.follow_up(follow_up)?,
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

/// Starts worker `id` with its own links to the lock servers.
fn start_worker(spec: &Spec, links: &mut Links, id: u32) -> Result<Worker, String> {
    let urls = links.urls_for(id, &spec.lock_urls)?;
    spec.spawn(id, &urls)
        .map_err(|error| format!("worker: {error}"))
}

/// The masters worker `id` cannot reach under `restart-master`: each worker
/// reaches three neighbouring masters of five, starting two further on than
/// the worker before it, so a holder holds exactly a bare majority and
/// shares one master with the next worker.
fn unreachable_masters(id: u32, servers: usize) -> Vec<usize> {
    let reach = reachable_masters(id, servers);
    (0..servers)
        .filter(|index| !reach.contains(index))
        .collect()
}

fn reachable_masters(id: u32, servers: usize) -> Vec<usize> {
    let majority = servers / 2 + 1;
    let first = (id.saturating_sub(1) as usize * 2) % servers.max(1);
    (0..majority).map(|k| (first + k) % servers).collect()
}

/// The one master holder `id` shares with another worker (the next one that
/// shares exactly one): restarted empty, it lets that worker to a majority.
fn shared_master(id: u32, workers: u32, servers: usize) -> usize {
    let mine = reachable_masters(id, servers);
    (1..=workers)
        .filter(|&other| other != id)
        .map(|other| {
            let theirs = reachable_masters(other, servers);
            mine.iter()
                .copied()
                .filter(|master| theirs.contains(master))
                .collect::<Vec<_>>()
        })
        .find(|shared| shared.len() == 1)
        .and_then(|shared| shared.first().copied())
        .unwrap_or(mine[0])
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

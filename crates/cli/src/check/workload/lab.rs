//! What a fault acts on during a run: the lock servers, the links, the
//! workers, the lab's own events, and the undoing still to come. One per
//! cell; each method of a fault's `FaultKind` (`faults/kind.rs`) gets it.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::failover::SentinelLock;
use super::links::Links;
use super::lock_server::LockServer;
use super::procs::{Spec, Worker};
use crate::check::event::{Event, What};

/// A piece of undoing: it gets the lab back when due.
type Work = Box<dyn FnOnce(&mut Lab) -> Result<(), String>>;

/// Undoing to do later: resuming or restarting a server, healing a link,
/// letting a paused worker go on.
pub struct Later {
    due: Instant,
    blocks: bool,
    at_end: bool,
    work: Work,
}

impl Later {
    /// `work`, done `delay` from now.
    pub fn after(
        delay: Duration,
        work: impl FnOnce(&mut Lab) -> Result<(), String> + 'static,
    ) -> Later {
        Later {
            due: Instant::now() + delay,
            blocks: false,
            at_end: false,
            work: Box::new(work),
        }
    }

    /// The lab injects nothing more until this is done: one fault at a time.
    pub fn blocking(mut self) -> Later {
        self.blocks = true;
        self
    }

    /// Done when the run ends too, if still pending (a paused server must
    /// answer for the end's look at the lock key; a paused worker must stop).
    pub fn also_at_end(mut self) -> Later {
        self.at_end = true;
        self
    }
}

/// The run as a fault sees it.
pub struct Lab {
    /// The fault's name, for the event of each injection.
    name: &'static str,
    /// The lease every recipe uses.
    pub lease: Duration,
    /// How many workers the run starts with (ids `1..=workers`).
    pub workers_at_start: u32,
    /// The lock servers.
    pub lock: LockServer,
    /// The Sentinel group, when the fault needs one.
    pub sentinel: Option<SentinelLock>,
    /// The workers' links to the lock servers.
    pub links: Links,
    /// Every worker started so far, killed ones included.
    pub workers: Vec<Worker>,
    spec: Spec,
    events: Vec<Event>,
    injections: Vec<u64>,
    pending: Vec<Later>,
    /// Which live worker is armed next.
    turn: usize,
    next_id: u32,
    replacements: Vec<u32>,
    /// Set once the run is over: what is undone then goes unrecorded.
    ending: bool,
}

impl Lab {
    /// The lab for a run of the fault `name` with these servers and links;
    /// no worker started yet.
    pub fn new(
        name: &'static str,
        lease: Duration,
        spec: Spec,
        workers_at_start: u32,
        lock: LockServer,
        sentinel: Option<SentinelLock>,
        links: Links,
    ) -> Lab {
        Lab {
            name,
            lease,
            workers_at_start,
            lock,
            sentinel,
            links,
            workers: Vec::new(),
            spec,
            events: Vec::new(),
            injections: Vec::new(),
            pending: Vec::new(),
            turn: 0,
            next_id: workers_at_start + 1,
            replacements: Vec::new(),
            ending: false,
        }
    }

    /// Starts worker `id` with its own links to the lock servers.
    ///
    /// # Errors
    /// When a proxy or the process cannot be started.
    pub fn start_worker(&mut self, id: u32) -> Result<(), String> {
        let urls = self.links.urls_for(id, &self.spec.lock_urls)?;
        let worker = self
            .spec
            .spawn(id, &urls)
            .map_err(|error| format!("worker: {error}"))?;
        self.workers.push(worker);
        Ok(())
    }

    /// Records a fault's step in the timeline (not after the run's end).
    pub fn note(&mut self, what: impl Into<String>) {
        if !self.ending {
            self.events
                .push(Event::now(None, What::Fault { what: what.into() }));
        }
    }

    /// Records the moment an injection took effect: it starts the
    /// checker's clock for "someone acquires again".
    pub fn injected(&mut self, what: What) {
        let event = Event::now(None, what);
        self.injections.push(event.t);
        self.events.push(event);
    }

    /// [`injected`](Self::injected), told in words.
    pub fn injected_note(&mut self, what: impl Into<String>) {
        self.injected(What::Fault { what: what.into() });
    }

    /// An injection named after the fault itself (faults the lab does alone).
    pub fn injected_now(&mut self) {
        self.injected_note(self.name);
    }

    /// How many injections took effect so far.
    pub fn injection_count(&self) -> usize {
        self.injections.len()
    }

    /// The next live worker not held by the lab, in turn; `None` when
    /// there is none.
    pub fn next_live(&mut self) -> Option<usize> {
        let live: Vec<usize> = (0..self.workers.len())
            .filter(|&index| !self.workers[index].gone && !self.workers[index].held_by_lab)
            .collect();
        if live.is_empty() {
            return None;
        }
        let index = live[self.turn % live.len()];
        self.turn += 1;
        Some(index)
    }

    /// Arms worker `index`: it stops itself at the fault's point.
    pub fn arm(&mut self, index: usize) {
        self.workers[index].signal(Signal::SIGUSR1);
    }

    /// Arms the next live worker, if any.
    pub fn arm_next(&mut self) {
        if let Some(index) = self.next_live() {
            self.arm(index);
        }
    }

    /// Lets worker `index` go on (SIGCONT).
    pub fn go_on(&mut self, index: usize) {
        self.workers[index].signal(Signal::SIGCONT);
    }

    /// Kills worker `index` with SIGKILL; a new worker takes its place
    /// at the end of this tick.
    pub fn kill_and_replace(&mut self, index: usize) {
        let worker = &mut self.workers[index];
        worker.kill();
        let id = worker.id;
        self.injected(What::Killed { worker: id });
        self.replacements.push(self.next_id);
        self.next_id += 1;
    }

    /// Starts the workers that replace killed ones.
    ///
    /// # Errors
    /// As for [`start_worker`](Self::start_worker).
    pub fn start_replacements(&mut self) -> Result<(), String> {
        for id in std::mem::take(&mut self.replacements) {
            self.start_worker(id)?;
        }
        Ok(())
    }

    /// Worker `id`'s index, if it was started.
    pub fn index_of(&self, id: u32) -> Option<usize> {
        self.workers.iter().position(|worker| worker.id == id)
    }

    /// Schedules undoing.
    pub fn later(&mut self, later: Later) {
        self.pending.push(later);
    }

    /// Whether undoing that holds back the next injection is pending.
    pub fn busy(&self) -> bool {
        self.pending.iter().any(|later| later.blocks)
    }

    /// Does the undoing due by `now`.
    ///
    /// # Errors
    /// When a server cannot be resumed or restarted.
    pub fn run_due(&mut self, now: Instant) -> Result<(), String> {
        let (due, pending) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition::<Vec<_>, _>(|later| later.due <= now);
        self.pending = pending;
        for later in due {
            (later.work)(self)?;
        }
        Ok(())
    }

    /// The run is over: does the pending undoing marked for the end,
    /// without recording it, and drops the rest.
    ///
    /// # Errors
    /// As for [`run_due`](Self::run_due).
    pub fn wind_down(&mut self) -> Result<(), String> {
        self.ending = true;
        for later in std::mem::take(&mut self.pending) {
            if later.at_end {
                (later.work)(self)?;
            }
        }
        Ok(())
    }

    /// Records an event as it is (the end's look at the lock key).
    pub fn push_event(&mut self, event: Event) {
        self.events.push(event);
    }

    /// The lab's events and injection times, and the workers, for the
    /// end of the run.
    pub fn finish(self) -> (Vec<Event>, Vec<u64>, Vec<Worker>) {
        (self.events, self.injections, self.workers)
    }
}

//! The read-write lock: readers share it, a writer excludes everyone.
//! Client 1 writes, clients 2 and 3 read; each acquire and release is one
//! script run (`rw_*_acquire.lua`, `rw_*_release.lua`); each holder
//! believes it holds until its acquire's time plus the lease, and the key
//! lives as long as its longest hold.

use stateright::{Model, Property};

use crate::server::Tick;
use crate::timeline::{Line, Narrated};

/// The property names.
pub mod names {
    /// docs/SAFETY.md and the lock's doc: the writer's exclusion.
    pub const WRITER_EXCLUSIVE: &str = "a writer excludes readers and other writers";
    /// Readers do share (the model is not trivially safe).
    pub const READERS_SHARE: &str = "readers share the lock";
}

/// The model.
#[derive(Clone, Debug)]
pub struct RwModel {
    /// The lease, in ticks.
    pub lease: Tick,
}

/// The lock hash of a read-write lock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RwServer {
    /// `mode`: none, read or write.
    pub writing: Option<bool>,
    /// Holders (bit per client).
    pub holders: u8,
    /// When the key expires.
    pub deadline: Tick,
}

impl RwServer {
    /// `rw_read_acquire.lua`: a read hold when nobody writes.
    pub fn read_acquire(&mut self, now: Tick, client: u8, lease: Tick) -> bool {
        if self.writing == Some(true) {
            return false;
        }
        self.writing = Some(false);
        self.holders |= 1 << client;
        self.deadline = self.deadline.max(now + lease);
        true
    }

    /// `rw_write_acquire.lua`: the write hold when nobody holds the lock.
    pub fn write_acquire(&mut self, now: Tick, client: u8, lease: Tick) -> bool {
        if self.writing.is_some() {
            return false;
        }
        self.writing = Some(true);
        self.holders = 1 << client;
        self.deadline = now + lease;
        true
    }

    /// `rw_read_release.lua` / `rw_write_release.lua`: drop the client's
    /// hold; the last one deletes the key.
    pub fn release(&mut self, client: u8) {
        self.holders &= !(1 << client);
        if self.holders == 0 {
            *self = RwServer::default();
        }
    }
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RwState {
    /// The clock.
    pub now: Tick,
    /// The lock.
    pub server: RwServer,
    /// Each client's belief: holding until (`None`: not holding).
    pub until: Vec<Option<Tick>>,
    /// Clients that finished.
    pub done: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances; the key expires at its deadline.
    Tick,
    /// Client acquires (client 0 writes, the others read).
    Acquire(u8),
    /// Client releases.
    Release(u8),
}

const CLIENTS: u8 = 3;

impl Model for RwModel {
    type State = RwState;
    type Action = Action;

    fn init_states(&self) -> Vec<RwState> {
        vec![RwState {
            now: 0,
            server: RwServer::default(),
            until: vec![None; usize::from(CLIENTS)],
            done: 0,
        }]
    }

    fn actions(&self, s: &RwState, actions: &mut Vec<Action>) {
        if s.server.writing.is_some() {
            actions.push(Action::Tick);
        }
        for c in 0..CLIENTS {
            let finished = s.done & (1 << c) != 0;
            match s.until[usize::from(c)] {
                None if !finished => actions.push(Action::Acquire(c)),
                Some(_) => actions.push(Action::Release(c)),
                None => {}
            }
        }
    }

    fn next_state(&self, s: &RwState, action: Action) -> Option<RwState> {
        let mut n = s.clone();
        match action {
            Action::Tick => {
                n.now += 1;
                if n.server.deadline <= n.now {
                    n.server = RwServer::default();
                }
            }
            Action::Acquire(c) => {
                let taken = if c == 0 {
                    n.server.write_acquire(n.now, c, self.lease)
                } else {
                    n.server.read_acquire(n.now, c, self.lease)
                };
                if !taken {
                    return None;
                }
                n.until[usize::from(c)] = Some(n.now + self.lease);
            }
            Action::Release(c) => {
                n.server.release(c);
                n.until[usize::from(c)] = None;
                n.done |= 1 << c;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::WRITER_EXCLUSIVE, |_, s: &RwState| {
                let believes = |c: usize| s.until[c].is_some_and(|until| s.now < until);
                !believes(0) || (1..usize::from(CLIENTS)).all(|c| !believes(c))
            }),
            Property::sometimes(names::READERS_SHARE, |_, s: &RwState| {
                s.until[1].is_some_and(|u| s.now < u) && s.until[2].is_some_and(|u| s.now < u)
            }),
        ]
    }
}

impl Narrated for RwModel {
    fn narrate(&self, before: &RwState, action: &Action, _after: &RwState) -> Vec<Line> {
        let now = before.now;
        match *action {
            Action::Tick => Vec::new(),
            Action::Acquire(0) => vec![Line::worker(now, 0, "acquired the write lock")],
            Action::Acquire(c) => vec![Line::worker(now, c, "acquired a read lock")],
            Action::Release(c) => vec![Line::worker(now, c, "releases")],
        }
    }

    fn verdict(&self, last: &RwState, property: &str) -> Line {
        Line::other(last.now, "lab", format!("BROKEN: {property}"))
    }
}

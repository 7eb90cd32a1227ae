//! Redlock's majority: a client takes the lock on each of three nodes in
//! turn (`acquire.lua` on each, one atomic step per node), holds it when a
//! majority granted it before its lease ran out, and believes it holds
//! until the start of its attempt plus the lease (the validity time).
//! Writes are not fenced here: a pause shows why fencing is needed.

use stateright::{Model, Property};

use crate::server::Tick;
use crate::store::Store;
use crate::timeline::{Line, Narrated};

/// Nodes, and the majority that holds the lock.
pub const NODES: u8 = 3;
const MAJORITY: u32 = 2;

/// The property names.
pub mod names {
    /// Redlock's promise (docs/REDLOCK.md), with the pause proviso.
    pub const EXCLUSIVE: &str = "no two owners hold a majority at once (no pause)";
    /// What an unfenced Redlock cannot keep under a pause.
    pub const NO_LOST_UPDATE: &str = "no accepted write overwrites one the writer did not read";
}

/// The model.
#[derive(Clone, Debug)]
pub struct RedlockModel {
    /// The lease, in ticks.
    pub lease: Tick,
    /// Client pauses allowed.
    pub pauses: u8,
}

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Wants the lock.
    Wants,
    /// Asking the nodes since `started`.
    Trying,
    /// Holds a majority.
    Holding,
    /// Read the counter.
    Read,
    /// Wrote; releases next.
    Wrote,
    /// Finished (or gave up).
    Done,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RlClient {
    /// Its step.
    pub step: Step,
    /// When its attempt started.
    pub started: Tick,
    /// Nodes asked (bit per node).
    pub asked: u8,
    /// Nodes that granted (bit per node).
    pub granted: u8,
    /// What it read.
    pub read: i8,
    /// Which acquisition its hold is.
    pub grant: u8,
    /// Stopped.
    pub paused: bool,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedlockState {
    /// The clock (the nodes' and clients' clocks agree).
    pub now: Tick,
    /// Each node's lock key: owner and expiry.
    pub nodes: Vec<Option<(u8, Tick)>>,
    /// Two clients.
    pub clients: Vec<RlClient>,
    /// The shared store, unfenced.
    pub store: Store,
    /// Pauses left.
    pub pauses: u8,
    /// Majorities taken so far.
    pub grants: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances; expired keys go.
    Tick,
    /// A client starts an attempt.
    Start(u8),
    /// A client asks node `n` (`acquire.lua` there).
    Ask(u8, u8),
    /// A client that asked every node counts its grants.
    Decide(u8),
    /// Reads the counter.
    Read(u8),
    /// Writes `read + 1`.
    Write(u8),
    /// Releases on every node it holds.
    Release(u8),
    /// Stops (SIGSTOP).
    Pause(u8),
    /// SIGCONT.
    Resume(u8),
}

impl RedlockModel {
    fn believes(&self, s: &RedlockState, c: &RlClient) -> bool {
        match c.step {
            Step::Holding => s.now < c.started + self.lease,
            Step::Read => true,
            _ => false,
        }
    }
}

impl Model for RedlockModel {
    type State = RedlockState;
    type Action = Action;

    fn init_states(&self) -> Vec<RedlockState> {
        let client = RlClient {
            step: Step::Wants,
            started: 0,
            asked: 0,
            granted: 0,
            read: 0,
            grant: 0,
            paused: false,
        };
        vec![RedlockState {
            now: 0,
            nodes: vec![None; usize::from(NODES)],
            clients: vec![client; 2],
            store: Store::default(),
            pauses: self.pauses,
            grants: 0,
        }]
    }

    fn actions(&self, s: &RedlockState, actions: &mut Vec<Action>) {
        let due = s
            .clients
            .iter()
            .any(|c| !c.paused && c.step == Step::Read && s.now + 1 >= c.started + self.lease);
        let waits = s.nodes.iter().any(Option::is_some);
        if waits && !due {
            actions.push(Action::Tick);
        }
        for (i, client) in s.clients.iter().enumerate() {
            let c = i as u8;
            if client.paused {
                actions.push(Action::Resume(c));
                continue;
            }
            match client.step {
                Step::Wants => actions.push(Action::Start(c)),
                Step::Trying => {
                    // Nodes are asked in order: any order is a renaming of nodes.
                    let next = client.asked.count_ones() as u8;
                    if next < NODES {
                        actions.push(Action::Ask(c, next));
                    } else {
                        actions.push(Action::Decide(c));
                    }
                }
                Step::Holding if self.believes(s, client) => actions.push(Action::Read(c)),
                Step::Holding => actions.push(Action::Release(c)),
                Step::Read => actions.push(Action::Write(c)),
                Step::Wrote => actions.push(Action::Release(c)),
                Step::Done => {}
            }
            if s.pauses > 0 && client.step != Step::Done {
                actions.push(Action::Pause(c));
            }
        }
    }

    fn next_state(&self, s: &RedlockState, action: Action) -> Option<RedlockState> {
        let mut n = s.clone();
        let now = n.now;
        match action {
            Action::Tick => {
                n.now += 1;
                for node in &mut n.nodes {
                    if node.is_some_and(|(_, deadline)| deadline <= n.now) {
                        *node = None;
                    }
                }
            }
            Action::Start(c) => {
                let client = &mut n.clients[usize::from(c)];
                client.step = Step::Trying;
                client.started = now;
            }
            Action::Ask(c, node) => {
                let client = &mut n.clients[usize::from(c)];
                client.asked |= 1 << node;
                let key = &mut n.nodes[usize::from(node)];
                if key.is_none() {
                    *key = Some((c, now + self.lease));
                    client.granted |= 1 << node;
                }
            }
            Action::Decide(c) => {
                let valid = now < n.clients[usize::from(c)].started + self.lease;
                let majority = n.clients[usize::from(c)].granted.count_ones() >= MAJORITY;
                if majority && valid {
                    n.grants += 1;
                    let client = &mut n.clients[usize::from(c)];
                    client.step = Step::Holding;
                    client.grant = n.grants;
                } else {
                    release(&mut n, c);
                }
            }
            Action::Read(c) => {
                let value = n.store.value;
                let client = &mut n.clients[usize::from(c)];
                client.read = value;
                client.step = Step::Read;
            }
            Action::Write(c) => {
                let client = &mut n.clients[usize::from(c)];
                client.step = Step::Wrote;
                let (read, grant) = (client.read, client.grant);
                n.store
                    .write(read, u32::from(grant), grant, n.grants, false);
            }
            Action::Release(c) => release(&mut n, c),
            Action::Pause(c) => {
                n.pauses -= 1;
                n.clients[usize::from(c)].paused = true;
            }
            Action::Resume(c) => n.clients[usize::from(c)].paused = false,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::EXCLUSIVE, |m: &RedlockModel, s: &RedlockState| {
                s.pauses < m.pauses || s.clients.iter().filter(|c| m.believes(s, c)).count() <= 1
            }),
            Property::always(names::NO_LOST_UPDATE, |_, s: &RedlockState| {
                !s.store.lost_update
            }),
        ]
    }
}

/// Deletes the client's key on every node still holding it; the client is done.
fn release(s: &mut RedlockState, c: u8) {
    for node in &mut s.nodes {
        if node.is_some_and(|(owner, _)| owner == c) {
            *node = None;
        }
    }
    s.clients[usize::from(c)].step = Step::Done;
}

impl Narrated for RedlockModel {
    fn narrate(&self, before: &RedlockState, action: &Action, after: &RedlockState) -> Vec<Line> {
        let now = before.now;
        let line = |c: u8, text: String| vec![Line::worker(now, c, text)];
        match *action {
            Action::Tick => {
                let expired = (0..before.nodes.len())
                    .filter(|&i| before.nodes[i].is_some() && after.nodes[i].is_none())
                    .map(|i| format!("node{}", i + 1))
                    .collect::<Vec<_>>();
                if expired.is_empty() {
                    Vec::new()
                } else {
                    vec![Line::other(
                        after.now,
                        "redis",
                        format!("lab:lock expired on {}", expired.join(", ")),
                    )]
                }
            }
            Action::Start(c) => line(c, "tries to acquire (Redlock over 3 nodes)".into()),
            Action::Ask(c, node) => {
                let granted = after.clients[usize::from(c)].granted & (1 << node) != 0;
                let text = if granted { "granted" } else { "busy" };
                line(c, format!("node{}: {text}", node + 1))
            }
            Action::Decide(c) => {
                let client = &after.clients[usize::from(c)];
                if client.step == Step::Holding {
                    line(
                        c,
                        format!(
                            "acquired the lock (a majority); believes it holds until t={}",
                            client.started + self.lease
                        ),
                    )
                } else {
                    line(c, "no majority in time: releases what it got".into())
                }
            }
            Action::Read(c) => line(
                c,
                format!("read counter = {}", after.clients[usize::from(c)].read),
            ),
            Action::Write(c) => {
                let client = &before.clients[usize::from(c)];
                let written =
                    before
                        .store
                        .clone()
                        .write(client.read, 0, client.grant, before.grants, false);
                line(c, Store::describe(client.read, 0, written))
            }
            Action::Release(c) => line(c, "releases".into()),
            Action::Pause(c) => {
                let point = if before.clients[usize::from(c)].step == Step::Read {
                    "stops itself at between (SIGSTOP)"
                } else {
                    "stops itself (SIGSTOP)"
                };
                line(c, point.into())
            }
            Action::Resume(c) => vec![
                Line::other(now, "lab", format!("SIGCONT w{}", c + 1)),
                Line::worker(now, c, "runs again"),
            ],
        }
    }

    fn verdict(&self, last: &RedlockState, property: &str) -> Line {
        Line::other(last.now, "lab", format!("BROKEN: {property}"))
    }
}

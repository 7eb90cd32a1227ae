//! Deadlock detection: parties taking exclusive locks in any order, each
//! busy attempt followed by the check script (one atomic step: walk the
//! holders and the wait edges from the lock's holders, ignore an edge whose
//! waiter holds its lock, refuse the party the walk comes back to and write
//! no edge for it, else write its edge). A wait ends by acquiring, giving up
//! (a timeout or a cancelled future: the same to Redis) or being refused;
//! its edge is then deleted by a DEL sent after it. A waiter's edge may
//! also expire while it waits (its next attempt late), until its next check
//! writes it again.
//!
//! Which party waits, for the properties, is the client's view, not the
//! edges': a party waits for a lock from its busy attempt until its wait
//! ends, and a wait that ended counts until its DEL reaches the server (a
//! release counts from when it reaches the server too). The DEL is sent on
//! the party's connection before its next command (`fifo`); sent late, the
//! checker finds a false deadlock ([`names::REAL_CYCLE`]).

use stateright::{Model, Property};

use crate::timeline::{Line, Narrated};

/// The property names.
pub mod names {
    /// A reported deadlock is a real cycle when it is reported: every edge
    /// of the path is current (the waiter waits for the lock, its holder
    /// holds it) and the path closes at the refused party.
    pub const REAL_CYCLE: &str = "a reported deadlock is a real cycle at that moment";
    /// A cycle that stays is reported by the time each of its members has
    /// run one check since it closed (or since a member's wait key last
    /// expired under it: its attempt came late).
    pub const REPORTED_WITHIN_A_ROUND: &str =
        "a cycle is reported within one check of each of its members";
    /// Only one party of a cycle is refused: no report names a refused
    /// party as a waiter.
    pub const ONE_REFUSED: &str = "only one party of a cycle is refused";
    /// Deadlocks are reported (the model is not trivially safe).
    pub const REPORTED: &str = "a deadlock is reported";
}

/// The script's depth bound on the walk.
pub const MAX_DEPTH: usize = 16;

/// The model.
#[derive(Clone, Debug)]
pub struct DeadlockModel {
    /// Parties (at most 8).
    pub parties: u8,
    /// Locks (at most 8); each party takes every lock once, in any order.
    pub locks: u8,
    /// Waits that may end by a timeout or a cancellation, over all parties.
    pub give_ups: u8,
    /// The DEL of an ended wait's edge reaches the server before the
    /// party's next command (one connection, in order). Off: it may land
    /// any time later.
    pub fifo: bool,
    /// The walk's depth bound: [`MAX_DEPTH`], or less to see a long cycle missed.
    pub max_depth: usize,
    /// Wait keys that may expire while their party still waits (its next
    /// attempt late: a pause, a slow network), over all parties.
    pub expiries: u8,
}

/// Where a party is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Between acquires: takes a lock it does not hold next, or releases
    /// all once it holds every lock.
    Idle,
    /// Its attempt on the lock answered busy; the check runs next.
    Checking(u8),
    /// Its check wrote its edge; it attempts the lock again.
    Waiting(u8),
    /// Its wait ended without the lock (refused, gave up) or it holds
    /// every lock: it releases what it holds.
    Releasing,
    /// Finished.
    Done,
}

/// One party.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Party {
    /// The locks it holds (bit per lock).
    pub held: u8,
    /// Where it is.
    pub phase: Phase,
    /// The lock of its wait that ended and whose DEL has not reached the
    /// server (the party still counts as waiting for it).
    pub ending: Option<u8>,
    /// A later command of the party reached the server before that DEL
    /// (only without `fifo`): its wait is over for everyone to see.
    pub overtaken: bool,
}

/// One edge of a reported cycle: `waiter` waits for `lock`, held by `holder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Edge {
    /// The party waiting.
    pub waiter: u8,
    /// The lock it waits for.
    pub lock: u8,
    /// The party holding that lock.
    pub holder: u8,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeadlockState {
    /// Redis: each lock's holder party.
    pub holders: Vec<Option<u8>>,
    /// Redis: each party's wait key (the lock it waits for).
    pub edges: Vec<Option<u8>>,
    /// The clients.
    pub parties: Vec<Party>,
    /// Give-ups left.
    pub give_ups: u8,
    /// Expiries left.
    pub expiries: u8,
    /// The cycle the last step reported (refused party first); cleared by
    /// the next step.
    pub report: Option<Vec<Edge>>,
    /// The members of the real cycle (bit per party; 0: none).
    pub cycle: u8,
    /// The members of `cycle` that ran a check since it closed (or since
    /// it was last reported, or a wait key expired).
    pub checked: u8,
    /// The parties refused so far.
    pub refused: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The party's lock script on a lock: acquired, or busy.
    Attempt(u8, u8),
    /// The party's check script after a busy attempt.
    Check(u8),
    /// The party's wait ends by a timeout or a cancellation.
    GiveUp(u8),
    /// The DEL of the party's ended wait reaches the server.
    Del(u8),
    /// The party's wait key expires while it still waits.
    Expire(u8),
    /// The party releases a lock.
    Release(u8, u8),
}

impl DeadlockState {
    /// Whether `party` waits for `lock`, in the clients' view.
    pub fn waits(&self, party: u8, lock: u8) -> bool {
        let p = &self.parties[usize::from(party)];
        match p.phase {
            Phase::Checking(l) | Phase::Waiting(l) => l == lock,
            // An ended wait counts until its DEL lands, unless it acquired.
            _ => p.ending == Some(lock) && !p.overtaken && p.held & (1 << lock) == 0,
        }
    }

    /// The lock `party` waits for, in the clients' view.
    fn waiting_for(&self, party: u8) -> Option<u8> {
        (0..self.holders.len() as u8).find(|&lock| self.waits(party, lock))
    }

    /// The parties on a cycle of the wait-for graph (clients' view): each
    /// party waits for at most one lock and each lock has one holder, so
    /// following the single successor finds every cycle.
    fn real_cycle(&self) -> u8 {
        let mut members = 0u8;
        for start in 0..self.parties.len() as u8 {
            let mut at = start;
            for _ in 0..self.parties.len() {
                let next = self
                    .waiting_for(at)
                    .and_then(|lock| self.holders[usize::from(lock)]);
                match next {
                    Some(next) => at = next,
                    None => break,
                }
                if at == start {
                    members |= 1 << start;
                    break;
                }
            }
        }
        members
    }

    /// The check script of `party` after its busy attempt on `lock`: the
    /// cycle back to `party` (its path), or `None` when the walk does not
    /// come back (then the script writes the party's edge).
    pub fn check(&self, party: u8, lock: u8, max_depth: usize) -> Option<Vec<Edge>> {
        // Depth-first over (lock, path so far); each party visited once.
        let mut visited = 0u8;
        let mut stack = vec![(lock, vec![])];
        while let Some((at, path)) = stack.pop() {
            let Some(holder) = self.holders[usize::from(at)] else {
                continue;
            };
            let waiter = path.last().map_or(party, |edge: &Edge| edge.holder);
            let mut path = path;
            path.push(Edge {
                waiter,
                lock: at,
                holder,
            });
            if holder == party {
                return Some(path);
            }
            if visited & (1 << holder) != 0 || path.len() >= max_depth {
                continue;
            }
            visited |= 1 << holder;
            let Some(next) = self.edges[usize::from(holder)] else {
                continue;
            };
            // A stale edge: its waiter has acquired the lock since.
            if self.holders[usize::from(next)] == Some(holder) {
                continue;
            }
            stack.push((next, path));
        }
        None
    }

    fn party(&self, party: u8) -> &Party {
        &self.parties[usize::from(party)]
    }
}

impl DeadlockModel {
    fn all(&self) -> u8 {
        ((1u16 << self.locks) - 1) as u8
    }

    /// The party may send a command: with `fifo`, only once its DEL is sent
    /// ahead of it (the model lets the DEL land first).
    fn may_send(&self, p: &Party) -> bool {
        !self.fifo || p.ending.is_none()
    }
}

impl Model for DeadlockModel {
    type State = DeadlockState;
    type Action = Action;

    fn init_states(&self) -> Vec<DeadlockState> {
        vec![DeadlockState {
            holders: vec![None; usize::from(self.locks)],
            edges: vec![None; usize::from(self.parties)],
            parties: vec![
                Party {
                    held: 0,
                    phase: Phase::Idle,
                    ending: None,
                    overtaken: false,
                };
                usize::from(self.parties)
            ],
            give_ups: self.give_ups,
            expiries: self.expiries,
            report: None,
            cycle: 0,
            checked: 0,
            refused: 0,
        }]
    }

    fn actions(&self, s: &DeadlockState, actions: &mut Vec<Action>) {
        for (i, p) in s.parties.iter().enumerate() {
            let party = i as u8;
            if p.ending.is_some() {
                actions.push(Action::Del(party));
            }
            match p.phase {
                Phase::Idle if self.may_send(p) => {
                    for lock in (0..self.locks).filter(|l| p.held & (1 << l) == 0) {
                        actions.push(Action::Attempt(party, lock));
                    }
                }
                Phase::Checking(_) => {
                    actions.push(Action::Check(party));
                    if s.give_ups > 0 {
                        actions.push(Action::GiveUp(party));
                    }
                }
                Phase::Waiting(lock) => {
                    if s.expiries > 0 && s.edges[i] == Some(lock) {
                        actions.push(Action::Expire(party));
                    }
                    if self.may_send(p) {
                        actions.push(Action::Attempt(party, lock));
                    }
                    if s.give_ups > 0 {
                        actions.push(Action::GiveUp(party));
                    }
                }
                Phase::Releasing if self.may_send(p) => {
                    for lock in (0..self.locks).filter(|l| p.held & (1 << l) != 0) {
                        actions.push(Action::Release(party, lock));
                    }
                }
                _ => {}
            }
        }
    }

    fn next_state(&self, s: &DeadlockState, action: Action) -> Option<DeadlockState> {
        let mut n = s.clone();
        n.report = None;
        let mut checked_by = None;
        if let Action::Attempt(party, _) | Action::Check(party) | Action::Release(party, _) = action
        {
            let p = &mut n.parties[usize::from(party)];
            p.overtaken = p.ending.is_some();
        }
        match action {
            Action::Attempt(party, lock) => {
                let i = usize::from(party);
                if s.holders[usize::from(lock)].is_none() {
                    n.holders[usize::from(lock)] = Some(party);
                    let p = &mut n.parties[i];
                    p.held |= 1 << lock;
                    // The wait, if any, ended: its edge goes.
                    p.ending = s.edges[i];
                    p.phase = if p.held == self.all() {
                        Phase::Releasing
                    } else {
                        Phase::Idle
                    };
                } else {
                    n.parties[i].phase = Phase::Checking(lock);
                }
            }
            Action::Check(party) => {
                let i = usize::from(party);
                let Phase::Checking(lock) = s.party(party).phase else {
                    return None;
                };
                checked_by = Some(party);
                match s.check(party, lock, self.max_depth) {
                    Some(path) => {
                        // The script deletes the party's own edge of an
                        // earlier attempt with the refusal: no other member
                        // of the cycle can then find it (one refusal).
                        n.report = Some(path);
                        n.refused |= 1 << party;
                        n.parties[i].phase = Phase::Releasing;
                        n.edges[i] = None;
                    }
                    None => {
                        n.edges[i] = Some(lock);
                        n.parties[i].phase = Phase::Waiting(lock);
                    }
                }
            }
            Action::GiveUp(party) => {
                let i = usize::from(party);
                n.give_ups -= 1;
                n.parties[i].phase = Phase::Releasing;
                n.parties[i].ending = s.edges[i];
            }
            Action::Expire(party) => {
                n.expiries -= 1;
                n.edges[usize::from(party)] = None;
            }
            Action::Del(party) => {
                let i = usize::from(party);
                n.edges[i] = None;
                n.parties[i].ending = None;
                n.parties[i].overtaken = false;
            }
            Action::Release(party, lock) => {
                let p = &mut n.parties[usize::from(party)];
                p.held &= !(1 << lock);
                n.holders[usize::from(lock)] = None;
                if p.held == 0 {
                    p.phase = Phase::Done;
                }
            }
        }
        let cycle = n.real_cycle();
        if cycle != s.cycle || n.report.is_some() || matches!(action, Action::Expire(_)) {
            // A new cycle, a reported one, or a wait key gone under its
            // waiter (a check before it is written again cannot see the
            // cycle): the members' round starts again.
            n.cycle = cycle;
            n.checked = 0;
        } else if let Some(party) = checked_by
            && cycle & (1 << party) != 0
        {
            n.checked |= 1 << party;
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::REAL_CYCLE, |_, s: &DeadlockState| {
                let Some(path) = &s.report else {
                    return true;
                };
                let closes = path.first().map(|edge| edge.waiter) == path.last().map(|e| e.holder);
                let linked = path.windows(2).all(|pair| pair[0].holder == pair[1].waiter);
                // The refused party's own wait is its attempt's: it waited
                // until the check answered.
                let current = path.iter().enumerate().all(|(at, edge)| {
                    s.holders[usize::from(edge.lock)] == Some(edge.holder)
                        && (at == 0 || s.waits(edge.waiter, edge.lock))
                });
                closes && linked && current
            }),
            Property::always(names::REPORTED_WITHIN_A_ROUND, |_, s: &DeadlockState| {
                s.cycle == 0 || s.cycle & !s.checked != 0
            }),
            Property::always(names::ONE_REFUSED, |_, s: &DeadlockState| {
                s.report.as_ref().is_none_or(|path| {
                    path.iter()
                        .all(|edge| s.refused & (1 << edge.waiter) == 0 || edge == &path[0])
                })
            }),
            Property::sometimes(names::REPORTED, |_, s: &DeadlockState| s.report.is_some()),
        ]
    }
}

fn lock_name(lock: u8) -> String {
    format!("L{}", lock + 1)
}

impl Narrated for DeadlockModel {
    fn narrate(&self, before: &DeadlockState, action: &Action, after: &DeadlockState) -> Vec<Line> {
        match *action {
            Action::Attempt(party, lock) => {
                let text = if after.holders[usize::from(lock)] == Some(party)
                    && before.holders[usize::from(lock)].is_none()
                {
                    format!("acquired {}", lock_name(lock))
                } else {
                    format!("found {} busy", lock_name(lock))
                };
                vec![Line::worker(0, party, text)]
            }
            Action::Check(party) => {
                let text = match &after.report {
                    Some(path) => {
                        let cycle: Vec<String> = path
                            .iter()
                            .map(|e| {
                                format!(
                                    "w{} waits for {} held by w{}",
                                    e.waiter + 1,
                                    lock_name(e.lock),
                                    e.holder + 1
                                )
                            })
                            .collect();
                        format!("check: deadlock, refused ({})", cycle.join(", "))
                    }
                    None => "check: no cycle, wait edge written".to_owned(),
                };
                vec![Line::worker(0, party, text)]
            }
            Action::GiveUp(party) => vec![Line::worker(
                0,
                party,
                "gave up waiting (timeout or cancelled)",
            )],
            Action::Expire(party) => vec![Line::other(
                0,
                "redis",
                format!(
                    "w{}'s wait edge expired (its next attempt is late)",
                    party + 1
                ),
            )],
            Action::Del(party) => vec![Line::other(
                0,
                "redis",
                format!("DEL of w{}'s wait edge", party + 1),
            )],
            Action::Release(party, lock) => {
                vec![Line::worker(
                    0,
                    party,
                    format!("released {}", lock_name(lock)),
                )]
            }
        }
    }

    fn verdict(&self, _last: &DeadlockState, property: &str) -> Line {
        Line::other(0, "lab", format!("BROKEN: {property}"))
    }
}

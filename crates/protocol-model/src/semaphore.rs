//! The semaphore: permits taken by `semaphore_acquire.lua` (one atomic
//! step) and given back by `semaphore_release.lua`, whose reply may be
//! lost; the lost reply's request is sent again, and on a cluster its
//! request record answers the re-send.

use stateright::{Model, Property};

use crate::timeline::{Line, Narrated};

/// The property names.
pub mod names {
    /// The semaphore's promise.
    pub const PERMITS_BOUND: &str = "no more holders than permits";
    /// docs/SAFETY.md, Redis Cluster row: "no permit given back twice".
    pub const GIVEN_BACK_ONCE: &str = "no permit given back twice";
}

/// The model.
#[derive(Clone, Debug)]
pub struct SemaphoreModel {
    /// Permits the semaphore has.
    pub permits: u8,
    /// Clients, each taking one permit once.
    pub clients: u8,
    /// Lost replies allowed.
    pub lost_replies: u8,
    /// Requests carry a request record.
    pub request_records: bool,
}

/// The permit count and the request records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Permits {
    /// Permits available.
    pub count: u8,
    /// Requests run (their record).
    pub records: Vec<u8>,
}

impl Permits {
    /// `semaphore_acquire.lua`: one permit when one is available.
    pub fn acquire(&mut self) -> bool {
        if self.count == 0 {
            return false;
        }
        self.count -= 1;
        true
    }

    /// `semaphore_release.lua`: one permit back (the cluster wrapper's
    /// record makes a re-send answer from the record instead).
    pub fn release(&mut self, request: u8, records: bool) {
        if records && self.records.contains(&request) {
            return;
        }
        self.count += 1;
        if records {
            self.records.push(request);
        }
    }
}

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Wants a permit.
    Wants,
    /// Holds one.
    Holding,
    /// Its release is on the way to the server.
    Releasing,
    /// Its release ran; the reply is on the way.
    Replied,
    /// Finished.
    Done,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SemaphoreState {
    /// The server's permits.
    pub permits: Permits,
    /// Each client's step.
    pub clients: Vec<Step>,
    /// Lost replies left.
    pub lost_replies: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Takes a permit.
    Acquire(u8),
    /// Sends its release.
    Release(u8),
    /// The server runs the client's release.
    Run(u8),
    /// The reply reaches the client.
    Deliver(u8),
    /// The reply is lost; the release is sent again.
    LoseReply(u8),
}

impl Model for SemaphoreModel {
    type State = SemaphoreState;
    type Action = Action;

    fn init_states(&self) -> Vec<SemaphoreState> {
        vec![SemaphoreState {
            permits: Permits {
                count: self.permits,
                records: Vec::new(),
            },
            clients: vec![Step::Wants; usize::from(self.clients)],
            lost_replies: self.lost_replies,
        }]
    }

    fn actions(&self, s: &SemaphoreState, actions: &mut Vec<Action>) {
        for (i, step) in s.clients.iter().enumerate() {
            let c = i as u8;
            match step {
                Step::Wants if s.permits.count > 0 => actions.push(Action::Acquire(c)),
                Step::Holding => actions.push(Action::Release(c)),
                Step::Releasing => actions.push(Action::Run(c)),
                Step::Replied => {
                    actions.push(Action::Deliver(c));
                    if s.lost_replies > 0 {
                        actions.push(Action::LoseReply(c));
                    }
                }
                _ => {}
            }
        }
    }

    fn next_state(&self, s: &SemaphoreState, action: Action) -> Option<SemaphoreState> {
        let mut n = s.clone();
        match action {
            Action::Acquire(c) => {
                if !n.permits.acquire() {
                    return None;
                }
                n.clients[usize::from(c)] = Step::Holding;
            }
            Action::Release(c) => n.clients[usize::from(c)] = Step::Releasing,
            Action::Run(c) => {
                // One release per client: the client's index names its request.
                n.permits.release(c, self.request_records);
                n.clients[usize::from(c)] = Step::Replied;
            }
            Action::Deliver(c) => n.clients[usize::from(c)] = Step::Done,
            Action::LoseReply(c) => {
                n.lost_replies -= 1;
                n.clients[usize::from(c)] = Step::Releasing;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                names::PERMITS_BOUND,
                |m: &SemaphoreModel, s: &SemaphoreState| {
                    s.clients
                        .iter()
                        .filter(|&&step| step == Step::Holding)
                        .count()
                        <= usize::from(m.permits)
                },
            ),
            Property::always(
                names::GIVEN_BACK_ONCE,
                |m: &SemaphoreModel, s: &SemaphoreState| s.permits.count <= m.permits,
            ),
        ]
    }
}

impl Narrated for SemaphoreModel {
    fn narrate(
        &self,
        before: &SemaphoreState,
        action: &Action,
        after: &SemaphoreState,
    ) -> Vec<Line> {
        match action {
            Action::Acquire(c) => vec![Line::worker(
                0,
                *c,
                format!("took a permit ({} left)", after.permits.count),
            )],
            Action::Release(c) => vec![Line::worker(0, *c, "releases its permit")],
            Action::Run(c) => {
                let text = if after.permits.count == before.permits.count {
                    format!(
                        "answers w{}'s re-sent release from its request record",
                        c + 1
                    )
                } else {
                    format!(
                        "runs semaphore_release.lua for w{}: {} available",
                        c + 1,
                        after.permits.count
                    )
                };
                vec![Line::other(0, "redis", text)]
            }
            Action::Deliver(c) => vec![Line::worker(0, *c, "released")],
            Action::LoseReply(c) => vec![Line::other(
                0,
                "lab",
                format!(
                    "the reply to w{}'s semaphore_release.lua is lost; the request is sent again",
                    c + 1
                ),
            )],
        }
    }

    fn verdict(&self, _last: &SemaphoreState, property: &str) -> Line {
        Line::other(0, "lab", format!("BROKEN: {property}"))
    }
}

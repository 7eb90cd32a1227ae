//! A long waiter's claim to the lock's next turn (`lib/precedence.lua`,
//! read by `acquire.lua`; docs/SAFETY.md, invariant (g)). Client 1 is a
//! long waiter: finding the lock held it claims the next turn, and a free
//! lock then refuses client 0, a younger contender. Client 1 may stop for
//! good (a stopped process, a future nobody polls again) with its claim
//! standing, and the scheduler may leave it unpolled as long as it likes
//! (a future polled rarely). Client 0 wants the lock twice, client 1 once.
//!
//! Each acquire is one atomic step (the script and its reply); a client
//! refused by a free lock parks until the claim's end (the reply's PTTL) or
//! an unlock message; one that finds the lock held parks until a message,
//! and the claimant also until a third of the claim's keep (its retry).
//! The clock moves only while someone waits on it, so every path ends.

use stateright::{Model, Property};

use crate::server::Tick;
use crate::timeline::{Line, Narrated};

/// The property names.
pub mod names {
    /// docs/SAFETY.md (g): a claim only ever refuses; the lock stays exclusive.
    pub const EXCLUSIVE: &str = "a claim never grants: one holder at a time, the one Redis names";
    /// docs/SAFETY.md (g): how long a free lock may refuse.
    pub const REFUSES_BRIEFLY: &str =
        "a free lock refuses contenders at most one come-now window per claimant attempt";
    /// docs/SAFETY.md (g): liveness.
    pub const SERVED: &str = "every waiter that keeps running is served";
}

/// How a claim ends, the rule of the script under check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClaimRule {
    /// Since issue 35: the first refusal of a free lock cuts the claim to
    /// the come-now window; otherwise it lapses `keep` past its claimant's
    /// last attempt.
    CutOnRefusal,
    /// Before: the claim lapsed `keep` past its claimant's last attempt,
    /// whatever the free lock refused meanwhile.
    LapseOnly,
    /// A claim with no expiry (what `keep` guards against): a claimant that
    /// stops holds the free lock back for ever.
    NeverLapse,
}

/// The model.
#[derive(Clone, Debug)]
pub struct ClaimModel {
    /// How a claim ends.
    pub rule: ClaimRule,
    /// How long a claim stands past its claimant's last attempt, in ticks
    /// (`PRECEDENCE_KEEP`); the claimant tries again within a third of it.
    pub keep: Tick,
    /// The come-now window (`PRECEDENCE_COME`), in ticks.
    pub come: Tick,
    /// How many times the claimant may stop for good (0 or 1).
    pub stops: u8,
}

/// The claim key: its claimant and when it lapses (`None`: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    /// The claimant.
    pub owner: u8,
    /// When the key expires.
    pub deadline: Option<Tick>,
}

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to attempt.
    Ready,
    /// Parked: tries again once woken by a message or at `until`.
    Parked {
        /// Its timer (`None`: a message only).
        until: Option<Tick>,
        /// An unlock message arrived.
        woken: bool,
    },
    /// Holds the lock.
    Holding,
    /// Wants the lock no more.
    Done,
    /// Stopped for good (the claimant only).
    Stopped,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimState {
    /// The server's clock.
    pub now: Tick,
    /// Who holds the lock in Redis.
    pub holder: Option<u8>,
    /// The claim key.
    pub claim: Option<Claim>,
    /// Each client's phase.
    pub phases: [Phase; 2],
    /// Holds each client still wants.
    pub wants: [u8; 2],
    /// When a free lock first refused someone since the claimant's last
    /// attempt (history, for the bound).
    pub refused_at: Option<Tick>,
    /// Stops taken.
    pub stopped: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances; a claim expires at its deadline.
    Tick,
    /// The client runs `acquire.lua` and reads its reply.
    Attempt(u8),
    /// The client runs `release.lua`: the lock is deleted and the unlock
    /// message wakes every parked client.
    Release(u8),
    /// The claimant stops for good.
    Stop,
}

const CLAIMANT: u8 = 1;

impl ClaimModel {
    /// `acquire.lua` for client `c` (the claimant has waited longer than
    /// anyone else; the other client never waited long enough to claim).
    fn acquire(&self, n: &mut ClaimState, c: u8) {
        let i = usize::from(c);
        if let Some(holder) = n.holder {
            debug_assert_ne!(holder, c, "the model has no re-entry");
            n.phases[i] = if c == CLAIMANT {
                // Claims (or renews) the next turn; retries within a third.
                let deadline = match self.rule {
                    ClaimRule::NeverLapse => None,
                    _ => Some(n.now + self.keep),
                };
                n.claim = Some(Claim { owner: c, deadline });
                n.refused_at = None;
                Phase::Parked {
                    until: Some(n.now + (self.keep / 3).max(1)),
                    woken: false,
                }
            } else {
                Phase::Parked {
                    until: None,
                    woken: false,
                }
            };
            return;
        }
        match n.claim {
            Some(mut claim) if claim.owner != c => {
                // Refused: younger than the claimant.
                if self.rule == ClaimRule::CutOnRefusal {
                    let window = n.now + self.come;
                    claim.deadline = Some(claim.deadline.map_or(window, |d| d.min(window)));
                    n.claim = Some(claim);
                }
                n.refused_at.get_or_insert(n.now);
                n.phases[i] = Phase::Parked {
                    until: claim.deadline,
                    woken: false,
                };
            }
            claim => {
                if claim.is_some() {
                    // Its own claim, taken out with the lock.
                    n.claim = None;
                    n.refused_at = None;
                }
                n.holder = Some(c);
                n.phases[i] = Phase::Holding;
            }
        }
    }
}

impl Model for ClaimModel {
    type State = ClaimState;
    type Action = Action;

    fn init_states(&self) -> Vec<ClaimState> {
        vec![ClaimState {
            now: 0,
            holder: None,
            claim: None,
            phases: [Phase::Ready; 2],
            wants: [2, 1],
            refused_at: None,
            stopped: 0,
        }]
    }

    fn actions(&self, s: &ClaimState, actions: &mut Vec<Action>) {
        let mut timers = false;
        for c in 0..2u8 {
            match s.phases[usize::from(c)] {
                Phase::Ready => actions.push(Action::Attempt(c)),
                Phase::Parked { until, woken } => {
                    if woken || until.is_some_and(|until| until <= s.now) {
                        actions.push(Action::Attempt(c));
                    }
                    timers |= until.is_some_and(|until| until > s.now);
                }
                Phase::Holding => actions.push(Action::Release(c)),
                Phase::Done | Phase::Stopped => {}
            }
        }
        if timers {
            actions.push(Action::Tick);
        }
        let claimant = s.phases[usize::from(CLAIMANT)];
        if s.stopped < self.stops && matches!(claimant, Phase::Ready | Phase::Parked { .. }) {
            actions.push(Action::Stop);
        }
    }

    fn next_state(&self, s: &ClaimState, action: Action) -> Option<ClaimState> {
        let mut n = s.clone();
        match action {
            Action::Tick => {
                n.now += 1;
                if n.claim
                    .is_some_and(|claim| claim.deadline.is_some_and(|d| d <= n.now))
                {
                    n.claim = None;
                    n.refused_at = None;
                }
            }
            Action::Attempt(c) => self.acquire(&mut n, c),
            Action::Release(c) => {
                n.holder = None;
                for phase in &mut n.phases {
                    if let Phase::Parked { woken, .. } = phase {
                        *woken = true;
                    }
                }
                let i = usize::from(c);
                n.wants[i] -= 1;
                n.phases[i] = if n.wants[i] == 0 {
                    Phase::Done
                } else {
                    Phase::Ready
                };
            }
            Action::Stop => {
                n.phases[usize::from(CLAIMANT)] = Phase::Stopped;
                n.stopped += 1;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::EXCLUSIVE, |_, s: &ClaimState| {
                (0..2u8).all(|c| s.phases[usize::from(c)] != Phase::Holding || s.holder == Some(c))
            }),
            Property::always(
                names::REFUSES_BRIEFLY,
                |model: &ClaimModel, s: &ClaimState| {
                    s.holder.is_some()
                        || s.claim.is_none()
                        || s.refused_at.is_none_or(|at| s.now - at < model.come)
                },
            ),
            Property::eventually(names::SERVED, |_, s: &ClaimState| {
                s.phases
                    .iter()
                    .all(|phase| matches!(phase, Phase::Done | Phase::Stopped))
            }),
        ]
    }
}

impl Narrated for ClaimModel {
    fn narrate(&self, before: &ClaimState, action: &Action, after: &ClaimState) -> Vec<Line> {
        let now = before.now;
        match *action {
            Action::Tick => {
                if before.claim.is_some() && after.claim.is_none() {
                    vec![Line::other(after.now, "redis", "the claim expires")]
                } else {
                    Vec::new()
                }
            }
            Action::Attempt(c) => {
                let text = match after.phases[usize::from(c)] {
                    Phase::Holding if before.claim.is_some_and(|claim| claim.owner == c) => {
                        "acquired (its claim taken out)".to_owned()
                    }
                    Phase::Holding => "acquired".to_owned(),
                    _ if before.holder.is_none() => match after.claim.and_then(|c| c.deadline) {
                        Some(deadline) => {
                            format!("refused: the free lock is claimed until t={deadline}")
                        }
                        None => "refused: the free lock is claimed, with no end".to_owned(),
                    },
                    _ if c == CLAIMANT => "finds it held and claims the next turn".to_owned(),
                    _ => "finds it held and waits".to_owned(),
                };
                vec![Line::worker(now, c, text)]
            }
            Action::Release(c) => vec![Line::worker(now, c, "releases")],
            Action::Stop => vec![Line::worker(
                now,
                CLAIMANT,
                "stops (never polled again), its claim standing",
            )],
        }
    }

    fn verdict(&self, last: &ClaimState, property: &str) -> Line {
        Line::other(last.now, "lab", format!("BROKEN: {property}"))
    }
}

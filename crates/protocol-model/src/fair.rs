//! The fair lock's hand-off (`fair_acquire.lua`, `fair_release.lua`,
//! `fair_leave.lua`, `lib/fair_line.lua`'s `hand_to`): a release hands the
//! lock to the first waiter in line when that waiter left its terms (an
//! anonymous redlatch waiter), writing the hold to it and publishing its
//! token on the waiter's own channel; any other first waiter (a Redisson
//! one) is only woken and takes the free lock itself.
//!
//! Client 0 holds at the start; clients 1 and 2 wait, in that order. Each
//! script is one atomic step. A waiter joins the line, then subscribes to
//! its channel (a message before that is lost) and reads what it may have
//! missed (`FairLock::recheck`: the head, the PTTL, whether it holds);
//! parked, it wakes on a message, or when first in line at the holder's
//! lease end. Client 1 may be dropped at any point of its wait (its place,
//! and a hold handed to it that no guard took, given back by
//! `fair_leave.lua`), or die (it never runs again: a hold handed to it
//! lapses at the grant's lease, its place at its sign of life). Client 2
//! is a Redisson waiter when `java_second`. Live waiters' signs of life
//! never run out, and their place renewals wake them only once a dead
//! waiter is first (the one thing a renewal can change for them): the clock
//! moves only while someone waits on it, so a lost wake-up shows as a path
//! that ends with a waiter never served.

use stateright::{Model, Property};

use crate::server::Tick;
use crate::timeline::{Line, Narrated};

/// The property names.
pub mod names {
    /// docs/SAFETY.md: the fair lock's hand-off keeps the lock exclusive.
    pub const EXCLUSIVE: &str =
        "a guard believes it holds only while Redis names its owner, until the lease it counts";
    /// No lost wake-up: every waiter that keeps running is served.
    pub const SERVED: &str = "every waiter that keeps running gets the lock and releases it";
    /// A dropped waiter leaves nothing that blocks the others.
    pub const GIVEN_BACK: &str = "a dropped waiter never keeps a hold handed to it";
    /// An acquire returns a guard with lease left (red team, 2026-11-29).
    pub const BORN_LIVE: &str = "a hand-off is never taken for a guard whose lease already ended";
}

/// Where a handed guard counts its lease from: the rule of the client
/// under check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseFrom {
    /// The waiter's last call that found it waiting, when the hand-off's
    /// token is above the counter that call read (the release wrote the
    /// hold after it) and at least half the handed lease is left since that
    /// call; otherwise the waiter attempts: the code's rule.
    LastWaitingCall,
    /// As [`LeaseFrom::LastWaitingCall`], however long ago that call was: a
    /// message read after the handed hold lapsed gives a guard born expired.
    LastWaitingCallAnyAge,
    /// The waiter's last call that found it waiting, whatever the token: a
    /// hand-off that lapsed before that call ran is taken for a live one.
    LastWaitingCallUnchecked,
    /// The moment the message is read, after the release: too late.
    MessageRead,
}

/// The model.
#[derive(Clone, Debug)]
pub struct FairModel {
    /// A hold's lease, in ticks (taken by an acquire, or renewed).
    pub lease: Tick,
    /// A handed hold's first lease, in ticks: the waiter's place lease.
    pub grant: Tick,
    /// Where a handed guard counts its lease from.
    pub lease_from: LeaseFrom,
    /// `fair_leave.lua` gives back a hold handed to the waiter leaving.
    pub leave_gives_back: bool,
    /// Client 1 may be dropped (cancelled) once.
    pub drops: bool,
    /// Client 1 may die once.
    pub dies: bool,
    /// Client 2 is a Redisson waiter: never handed the lock.
    pub java_second: bool,
}

/// A message on a waiter's own channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// Redisson's unlock message, `0`: only wakes.
    Wake,
    /// A hand-off: the hold is the waiter's, with this fencing token.
    Handed(u8),
}

/// Where a client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to run the acquire script.
    Ready,
    /// In line, subscribing to its channel (then it reads the line's head).
    Subscribing,
    /// Parked until a message, or (first in line) the holder's lease end.
    Parked,
    /// Holds a guard it believes valid until `until`.
    Holding {
        /// The lease end the guard counts.
        until: Tick,
    },
    /// Dropped: its leave runs from a task of its own.
    Leaving,
    /// Done: released, or left.
    Done,
    /// Dead: never runs again.
    Dead,
}

/// The lock hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// Whose hold.
    pub owner: u8,
    /// When its lease ends.
    pub expires: Tick,
}

const CLIENTS: usize = 3;

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FairState {
    /// The server's clock.
    pub now: Tick,
    /// The lock hash.
    pub hold: Option<Hold>,
    /// The line, oldest first.
    pub line: Vec<u8>,
    /// Waiters whose terms the release may hand the lock to.
    pub terms: [bool; CLIENTS],
    /// When a dead waiter's sign of life runs out.
    pub life_ends: [Option<Tick>; CLIENTS],
    /// Subscribed to its own channel.
    pub subscribed: [bool; CLIENTS],
    /// The message waiting to be read on its channel.
    pub inbox: [Option<Message>; CLIENTS],
    /// When its last call that found it waiting was sent, and the fencing
    /// counter that call read.
    pub waiting_since: [(Tick, u8); CLIENTS],
    /// The fencing counter.
    pub counter: u8,
    /// Each client's phase.
    pub phases: [Phase; CLIENTS],
    /// Client 1 was dropped or died already.
    pub fault_taken: bool,
    /// A hand-off was taken for a guard whose lease had ended already.
    pub born_expired: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances; a lease ends.
    Tick,
    /// `fair_acquire.lua`.
    Attempt(u8),
    /// The subscription answers; then the line's head is read.
    Subscribed(u8),
    /// A parked waiter reads its message.
    Read(u8),
    /// A parked waiter's timer: the holder's lease should be over (first
    /// in line), or its place renewal finds a dead waiter first.
    LeaseEnd(u8),
    /// The watchdog renews a hold (`renew.lua`): the lease from now.
    Renew(u8),
    /// `fair_release.lua`.
    Release(u8),
    /// Client 1's acquire is dropped.
    Drop,
    /// `fair_leave.lua`, from the dropped waiter's task.
    Leave(u8),
    /// Client 1 dies.
    Die,
}

impl FairModel {
    fn takes_hand_off(&self, c: u8) -> bool {
        !(self.java_second && c == 2)
    }

    /// `drop_dead`: waiters at the front whose sign of life ran out.
    fn drop_dead(n: &mut FairState) {
        while let Some(&head) = n.line.first() {
            if n.life_ends[usize::from(head)].is_some_and(|end| end <= n.now) {
                n.line.remove(0);
                n.terms[usize::from(head)] = false;
            } else {
                break;
            }
        }
    }

    /// Publishes `message` on `c`'s channel: lost unless it listens.
    fn publish(n: &mut FairState, c: u8, message: Message) {
        if n.subscribed[usize::from(c)] {
            n.inbox[usize::from(c)] = Some(message);
        }
    }

    /// The free lock goes to the first waiter (`hand_to`), or wakes it.
    fn wake_first(&self, n: &mut FairState) {
        Self::drop_dead(n);
        let Some(&head) = n.line.first() else { return };
        if n.terms[usize::from(head)] {
            n.line.remove(0);
            n.terms[usize::from(head)] = false;
            n.hold = Some(Hold {
                owner: head,
                expires: n.now + self.grant,
            });
            n.counter += 1;
            Self::publish(n, head, Message::Handed(n.counter));
        } else {
            Self::publish(n, head, Message::Wake);
        }
    }

    fn acquire(&self, n: &mut FairState, c: u8) {
        let i = usize::from(c);
        let sent = n.now;
        if n.hold.is_some_and(|hold| hold.owner == c) {
            // Handed over: the lease set again from now.
            n.hold = Some(Hold {
                owner: c,
                expires: n.now + self.lease,
            });
            n.phases[i] = holding(sent, self.lease);
            return;
        }
        Self::drop_dead(n);
        let first = n.line.first().copied();
        if n.hold.is_none() && first.is_none_or(|first| first == c) {
            n.line.retain(|&w| w != c);
            n.terms[i] = false;
            n.hold = Some(Hold {
                owner: c,
                expires: n.now + self.lease,
            });
            n.counter += 1;
            n.phases[i] = holding(sent, self.lease);
            return;
        }
        if !n.line.contains(&c) {
            n.line.push(c);
            n.terms[i] = self.takes_hand_off(c);
        }
        if n.hold.is_none()
            && let Some(first) = n.line.first().copied()
            && first != c
        {
            Self::publish(n, first, Message::Wake);
        }
        n.waiting_since[i] = (sent, n.counter);
        n.phases[i] = if n.subscribed[i] {
            Phase::Parked
        } else {
            Phase::Subscribing
        };
    }

    /// `recheck`: after the subscription, park unless it holds, or is first
    /// with the lock free.
    fn recheck(n: &mut FairState, c: u8) {
        let i = usize::from(c);
        n.subscribed[i] = true;
        let holds = n.hold.is_some_and(|hold| hold.owner == c);
        let first_and_free = n.hold.is_none() && n.line.first() == Some(&c);
        let out_of_line = !n.line.contains(&c);
        n.phases[i] = if holds || first_and_free || out_of_line {
            Phase::Ready
        } else {
            Phase::Parked
        };
    }

    fn read(&self, n: &mut FairState, c: u8) {
        let i = usize::from(c);
        n.phases[i] = match n.inbox[i].take() {
            Some(Message::Handed(token)) => {
                let (since, counter) = n.waiting_since[i];
                let checked = matches!(
                    self.lease_from,
                    LeaseFrom::LastWaitingCall | LeaseFrom::LastWaitingCallAnyAge
                );
                let late = 2 * (n.now - since) >= self.grant;
                let phase = match self.lease_from {
                    _ if checked && token <= counter => Phase::Ready,
                    LeaseFrom::LastWaitingCall if late => Phase::Ready,
                    LeaseFrom::LastWaitingCall
                    | LeaseFrom::LastWaitingCallAnyAge
                    | LeaseFrom::LastWaitingCallUnchecked => holding(since, self.grant),
                    LeaseFrom::MessageRead => holding(n.now, self.grant),
                };
                if matches!(phase, Phase::Holding { until } if until <= n.now) {
                    n.born_expired = true;
                }
                phase
            }
            _ => Phase::Ready,
        };
    }

    fn release(&self, n: &mut FairState, c: u8) {
        if n.hold.is_some_and(|hold| hold.owner == c) {
            n.hold = None;
            self.wake_first(n);
        } else if n.hold.is_none() {
            self.wake_first(n);
        }
        n.phases[usize::from(c)] = Phase::Done;
    }

    fn leave(&self, n: &mut FairState, c: u8) {
        let i = usize::from(c);
        let in_line = n.line.contains(&c);
        n.line.retain(|&w| w != c);
        n.terms[i] = false;
        let mut gone = in_line;
        if !in_line
            && self.leave_gives_back
            && self.takes_hand_off(c)
            && n.hold.is_some_and(|hold| hold.owner == c)
        {
            n.hold = None;
            gone = true;
        }
        if gone && n.hold.is_none() {
            self.wake_first(n);
        }
        n.subscribed[i] = false;
        n.inbox[i] = None;
        n.phases[i] = Phase::Done;
    }

    fn waiting(phase: Phase) -> bool {
        matches!(phase, Phase::Ready | Phase::Subscribing | Phase::Parked)
    }
}

/// A guard that counts its lease of `lease` ticks from `from`.
fn holding(from: Tick, lease: Tick) -> Phase {
    Phase::Holding {
        until: from + lease,
    }
}

impl Model for FairModel {
    type State = FairState;
    type Action = Action;

    fn init_states(&self) -> Vec<FairState> {
        vec![FairState {
            now: 0,
            hold: Some(Hold {
                owner: 0,
                expires: self.lease,
            }),
            line: Vec::new(),
            terms: [false; CLIENTS],
            life_ends: [None; CLIENTS],
            subscribed: [false; CLIENTS],
            inbox: [None; CLIENTS],
            waiting_since: [(0, 0); CLIENTS],
            counter: 1,
            phases: [
                Phase::Holding { until: self.lease },
                Phase::Ready,
                Phase::Ready,
            ],
            fault_taken: false,
            born_expired: false,
        }]
    }

    fn actions(&self, s: &FairState, actions: &mut Vec<Action>) {
        // The clock moves while a hold's lease can end under a waiter.
        let waits = s.phases.iter().any(|&phase| Self::waiting(phase));
        let lapses = s.hold.is_some_and(|hold| hold.expires > s.now)
            || s.life_ends.iter().flatten().any(|&end| end > s.now);
        if waits && lapses {
            actions.push(Action::Tick);
        }
        for c in 0..CLIENTS as u8 {
            let i = usize::from(c);
            match s.phases[i] {
                Phase::Ready => actions.push(Action::Attempt(c)),
                Phase::Subscribing => actions.push(Action::Subscribed(c)),
                Phase::Parked => {
                    if s.inbox[i].is_some() {
                        actions.push(Action::Read(c));
                    }
                    let first = s.line.first() == Some(&c);
                    // Its place renewal (a third of the place lease) finds
                    // a first waiter whose sign of life ran out.
                    let dead_ahead = s.line.first().is_some_and(|&head| {
                        s.life_ends[usize::from(head)].is_some_and(|end| end <= s.now)
                    });
                    if (first && s.hold.is_none_or(|hold| hold.expires <= s.now)) || dead_ahead {
                        actions.push(Action::LeaseEnd(c));
                    }
                }
                Phase::Holding { until } => {
                    actions.push(Action::Release(c));
                    // A renewal that would change something.
                    if s.hold.is_some_and(|hold| hold.owner == c) && until < s.now + self.lease {
                        actions.push(Action::Renew(c));
                    }
                }
                Phase::Leaving => actions.push(Action::Leave(c)),
                Phase::Done | Phase::Dead => {}
            }
        }
        if !s.fault_taken && Self::waiting(s.phases[1]) {
            if self.drops {
                actions.push(Action::Drop);
            }
            if self.dies {
                actions.push(Action::Die);
            }
        }
    }

    fn next_state(&self, s: &FairState, action: Action) -> Option<FairState> {
        let mut n = s.clone();
        match action {
            Action::Tick => {
                n.now += 1;
                if n.hold.is_some_and(|hold| hold.expires <= n.now) {
                    n.hold = None;
                }
            }
            Action::Attempt(c) => self.acquire(&mut n, c),
            Action::Subscribed(c) => Self::recheck(&mut n, c),
            Action::Read(c) => self.read(&mut n, c),
            Action::LeaseEnd(c) => n.phases[usize::from(c)] = Phase::Ready,
            Action::Renew(c) => {
                // The hold is this owner's: the lease from now, counted
                // from the renewal's sending.
                n.hold = Some(Hold {
                    owner: c,
                    expires: n.now + self.lease,
                });
                n.phases[usize::from(c)] = holding(n.now, self.lease);
            }
            Action::Release(c) => self.release(&mut n, c),
            Action::Drop => {
                n.phases[1] = Phase::Leaving;
                n.fault_taken = true;
            }
            Action::Leave(c) => self.leave(&mut n, c),
            Action::Die => {
                n.phases[1] = Phase::Dead;
                n.life_ends[1] = Some(n.now + self.grant);
                n.subscribed[1] = false;
                n.fault_taken = true;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::EXCLUSIVE, |_, s: &FairState| {
                (0..CLIENTS as u8).all(|c| match s.phases[usize::from(c)] {
                    Phase::Holding { until } if until > s.now => s
                        .hold
                        .is_some_and(|hold| hold.owner == c && hold.expires >= until),
                    _ => true,
                })
            }),
            Property::always(names::BORN_LIVE, |_, s: &FairState| !s.born_expired),
            Property::always(names::GIVEN_BACK, |_, s: &FairState| {
                s.phases[1] != Phase::Done || s.hold.is_none_or(|hold| hold.owner != 1)
            }),
            Property::eventually(names::SERVED, |_, s: &FairState| {
                s.phases
                    .iter()
                    .all(|phase| matches!(phase, Phase::Done | Phase::Dead))
            }),
        ]
    }
}

impl Narrated for FairModel {
    fn narrate(&self, before: &FairState, action: &Action, after: &FairState) -> Vec<Line> {
        let now = before.now;
        let handed_to = |s: &FairState| s.hold.map(|hold| hold.owner);
        let release_text = |what: &str| match handed_to(after) {
            Some(next) if handed_to(before) != Some(next) => {
                format!("{what}; the lock is handed to w{}", next + 1)
            }
            _ => what.to_owned(),
        };
        match *action {
            Action::Tick => match (before.hold, after.hold) {
                (Some(hold), None) => vec![Line::other(
                    after.now,
                    "redis",
                    format!("w{}'s lease ends", hold.owner + 1),
                )],
                _ => Vec::new(),
            },
            Action::Attempt(c) => {
                let text = match after.phases[usize::from(c)] {
                    Phase::Holding { until } => format!("acquires (counts its lease to t={until})"),
                    _ => "joins the line (or keeps its place)".to_owned(),
                };
                vec![Line::worker(now, c, text)]
            }
            Action::Subscribed(c) => vec![Line::worker(
                now,
                c,
                "subscribed; reads the line's head and the lock",
            )],
            Action::Read(c) => {
                let text = match after.phases[usize::from(c)] {
                    Phase::Holding { until } => {
                        format!("reads the hand-off: holds, counting its lease to t={until}")
                    }
                    _ => "is woken".to_owned(),
                };
                vec![Line::worker(now, c, text)]
            }
            Action::LeaseEnd(c) => vec![Line::worker(now, c, "wakes at the lease end")],
            Action::Renew(c) => vec![Line::worker(now, c, "renews")],
            Action::Release(c) => vec![Line::worker(now, c, release_text("releases"))],
            Action::Drop => vec![Line::worker(now, 1, "is dropped")],
            Action::Leave(c) => vec![Line::worker(now, c, release_text("leaves"))],
            Action::Die => vec![Line::worker(now, 1, "dies")],
        }
    }

    fn verdict(&self, last: &FairState, property: &str) -> Line {
        Line::other(last.now, "lab", format!("BROKEN: {property}"))
    }
}

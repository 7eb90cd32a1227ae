//! The seeds' broken recipes, as the safety lab runs them
//! (`crates/cli/src/check/recipes/`): `setnx-expire` (SETNX, then EXPIRE
//! as a second command; DEL to release), `get-del` (SET NX PX with a
//! token; release by GET, compare, DEL) and `set-nx-px` (SET NX PX;
//! release by a compare-and-delete script; no fencing). Each command is one
//! atomic step; a holder believes it holds until its own lease end.

use stateright::{Model, Property};

use crate::server::Tick;
use crate::store::Store;
use crate::timeline::{Line, Narrated};

/// Which recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recipe {
    /// SETNX, then EXPIRE; DEL to release.
    SetnxExpire,
    /// SET NX PX; release by GET, compare, DEL.
    GetDel,
    /// SET NX PX; release by a compare-and-delete script.
    SetNxPx,
}

/// The property names, in the words of the lab's promises.
pub mod names {
    /// The lab's L promise.
    pub const LIVE: &str = "someone acquires again within a bounded time";
    /// The lab's no-lost-updates promise.
    pub const NO_LOST_UPDATE: &str = "no accepted write overwrites one the writer did not read";
    /// What a release must do.
    pub const OWN_LOCK: &str = "a release deletes only its own lock";
}

/// The model: a recipe, its lease and the faults allowed.
#[derive(Clone, Debug)]
pub struct RecipeModel {
    /// The recipe.
    pub recipe: Recipe,
    /// The lease, in ticks.
    pub lease: Tick,
    /// Client pauses allowed.
    pub pauses: u8,
    /// Crashes (kill -9) allowed, between SETNX and EXPIRE.
    pub crashes: u8,
}

/// Where a worker is in its critical section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Wants the lock.
    Wants,
    /// `setnx-expire`: SETNX succeeded, EXPIRE not yet sent.
    Set,
    /// Holds the lock.
    Holding,
    /// Read the counter; writes next.
    Read,
    /// Wrote; releases next.
    Wrote,
    /// `get-del`: GET found its token; DEL next.
    Compared,
    /// Finished.
    Done,
    /// Killed.
    Dead,
}

/// One worker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Worker {
    /// Its step.
    pub step: Step,
    /// What it read.
    pub read: i8,
    /// Its own lease end: it believes it holds until then.
    pub until: Tick,
    /// Which acquisition its hold is.
    pub grant: u8,
    /// Stopped.
    pub paused: bool,
}

/// The lock key: its owner and expiry (`None`: no expiry).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The worker whose token it holds.
    pub owner: u8,
    /// When it expires.
    pub deadline: Option<Tick>,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecipeState {
    /// The server's clock.
    pub now: Tick,
    /// The lock key.
    pub key: Option<Key>,
    /// Two workers.
    pub workers: Vec<Worker>,
    /// The shared store.
    pub store: Store,
    /// Pauses left.
    pub pauses: u8,
    /// Crashes left.
    pub crashes: u8,
    /// Acquisitions so far.
    pub grants: u8,
    /// A release deleted another worker's lock.
    pub deleted_other: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances; an expired key goes.
    Tick,
    /// SETNX, or SET NX PX.
    Acquire(u8),
    /// `setnx-expire`'s second command.
    Expire(u8),
    /// Reads the counter.
    Read(u8),
    /// Writes `read + 1`.
    Write(u8),
    /// DEL (`setnx-expire`), GET and compare (`get-del`), compare-and-delete (`set-nx-px`).
    Release(u8),
    /// `get-del`'s DEL.
    Del(u8),
    /// The worker stops itself (SIGSTOP).
    Pause(u8),
    /// SIGCONT.
    Resume(u8),
    /// kill -9.
    Crash(u8),
}

impl RecipeModel {
    fn max_time(&self) -> Tick {
        2 * self.lease + 2
    }
}

impl Model for RecipeModel {
    type State = RecipeState;
    type Action = Action;

    fn init_states(&self) -> Vec<RecipeState> {
        let worker = Worker {
            step: Step::Wants,
            read: 0,
            until: 0,
            grant: 0,
            paused: false,
        };
        vec![RecipeState {
            now: 0,
            key: None,
            workers: vec![worker; 2],
            store: Store::default(),
            pauses: self.pauses,
            crashes: self.crashes,
            grants: 0,
            deleted_other: false,
        }]
    }

    fn actions(&self, s: &RecipeState, actions: &mut Vec<Action>) {
        // A running worker goes through its critical section and release
        // before its lease ends; only a paused one lets it run out.
        let due = s.workers.iter().any(|w| {
            let inside = matches!(
                w.step,
                Step::Holding | Step::Read | Step::Wrote | Step::Compared
            );
            !w.paused && inside && s.now + 1 >= w.until
        });
        if s.now < self.max_time() && !due {
            actions.push(Action::Tick);
        }
        for (i, w) in s.workers.iter().enumerate() {
            let c = i as u8;
            if w.paused {
                actions.push(Action::Resume(c));
                continue;
            }
            match w.step {
                Step::Wants if s.key.is_none() => actions.push(Action::Acquire(c)),
                Step::Set => {
                    actions.push(Action::Expire(c));
                    if s.crashes > 0 {
                        actions.push(Action::Crash(c));
                    }
                }
                Step::Holding => actions.push(Action::Read(c)),
                Step::Read => actions.push(Action::Write(c)),
                Step::Wrote => actions.push(Action::Release(c)),
                Step::Compared => actions.push(Action::Del(c)),
                _ => {}
            }
            if s.pauses > 0 && !matches!(w.step, Step::Done | Step::Dead) {
                actions.push(Action::Pause(c));
            }
        }
    }

    fn next_state(&self, s: &RecipeState, action: Action) -> Option<RecipeState> {
        let mut n = s.clone();
        let now = n.now;
        match action {
            Action::Tick => {
                n.now += 1;
                if n.key
                    .as_ref()
                    .is_some_and(|k| k.deadline.is_some_and(|d| d <= n.now))
                {
                    n.key = None;
                }
            }
            Action::Acquire(c) => {
                let with_expiry = self.recipe != Recipe::SetnxExpire;
                n.key = Some(Key {
                    owner: c,
                    deadline: with_expiry.then_some(now + self.lease),
                });
                n.grants += 1;
                let w = &mut n.workers[usize::from(c)];
                w.grant = n.grants;
                if with_expiry {
                    w.step = Step::Holding;
                    w.until = now + self.lease;
                } else {
                    w.step = Step::Set;
                }
            }
            Action::Expire(c) => {
                if let Some(key) = &mut n.key {
                    key.deadline = Some(now + self.lease);
                }
                let w = &mut n.workers[usize::from(c)];
                w.step = Step::Holding;
                w.until = now + self.lease;
            }
            Action::Read(c) => {
                let value = n.store.value;
                let w = &mut n.workers[usize::from(c)];
                w.read = value;
                w.step = Step::Read;
            }
            Action::Write(c) => {
                let w = &mut n.workers[usize::from(c)];
                w.step = Step::Wrote;
                let (read, grant) = (w.read, w.grant);
                n.store
                    .write(read, u32::from(grant), grant, n.grants, false);
            }
            Action::Release(c) => {
                let own = n.key.as_ref().is_some_and(|k| k.owner == c);
                match self.recipe {
                    Recipe::SetnxExpire => {
                        n.deleted_other |= n.key.is_some() && !own;
                        n.key = None;
                        n.workers[usize::from(c)].step = Step::Done;
                    }
                    Recipe::SetNxPx => {
                        if own {
                            n.key = None;
                        }
                        n.workers[usize::from(c)].step = Step::Done;
                    }
                    Recipe::GetDel => {
                        n.workers[usize::from(c)].step =
                            if own { Step::Compared } else { Step::Done };
                    }
                }
            }
            Action::Del(c) => {
                let own = n.key.as_ref().is_some_and(|k| k.owner == c);
                n.deleted_other |= n.key.is_some() && !own;
                n.key = None;
                n.workers[usize::from(c)].step = Step::Done;
            }
            Action::Pause(c) => {
                n.pauses -= 1;
                n.workers[usize::from(c)].paused = true;
            }
            Action::Resume(c) => n.workers[usize::from(c)].paused = false,
            Action::Crash(c) => {
                n.crashes -= 1;
                n.workers[usize::from(c)].step = Step::Dead;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(names::LIVE, |_, s: &RecipeState| {
                // A key without expiry whose owner is dead is never freed.
                !s.key.as_ref().is_some_and(|k| {
                    k.deadline.is_none() && s.workers[usize::from(k.owner)].step == Step::Dead
                })
            }),
            Property::always(names::NO_LOST_UPDATE, |_, s: &RecipeState| {
                !s.store.lost_update
            }),
            Property::always(names::OWN_LOCK, |_, s: &RecipeState| !s.deleted_other),
        ]
    }
}

impl Narrated for RecipeModel {
    fn narrate(&self, before: &RecipeState, action: &Action, after: &RecipeState) -> Vec<Line> {
        let now = before.now;
        let line = |c: u8, text: String| vec![Line::worker(now, c, text)];
        match *action {
            Action::Tick => {
                if before.key.is_some() && after.key.is_none() {
                    vec![Line::other(
                        after.now,
                        "redis",
                        "lab:lock expired (its lease ran out)",
                    )]
                } else {
                    Vec::new()
                }
            }
            Action::Acquire(c) => match self.recipe {
                Recipe::SetnxExpire => line(c, "acquired the lock (SETNX; no expiry yet)".into()),
                _ => line(c, "acquired the lock".into()),
            },
            Action::Expire(c) => line(c, format!("sets the expiry (PEXPIRE {})", self.lease)),
            Action::Read(c) => line(
                c,
                format!("read counter = {}", after.workers[usize::from(c)].read),
            ),
            Action::Write(c) => {
                let w = &before.workers[usize::from(c)];
                let written = before.store.clone().write(
                    w.read,
                    u32::from(w.grant),
                    w.grant,
                    before.grants,
                    false,
                );
                line(c, Store::describe(w.read, u32::from(w.grant), written))
            }
            Action::Release(c) => {
                let own = before.key.as_ref().is_some_and(|k| k.owner == c);
                let text = match (self.recipe, own) {
                    (Recipe::GetDel, true) => "releases: GET finds its own token",
                    (Recipe::GetDel, false) => "release: the lock was no longer its own",
                    (_, true) => "released (deleted the lock key)",
                    (Recipe::SetnxExpire, false) if before.key.is_some() => {
                        "released (deleted the lock key): that was another worker's lock"
                    }
                    (_, false) => "release: the lock was no longer its own",
                };
                line(c, text.into())
            }
            Action::Del(c) => {
                let other = before
                    .key
                    .as_ref()
                    .filter(|k| k.owner != c)
                    .map(|k| k.owner);
                match other {
                    Some(o) => line(
                        c,
                        format!(
                            "released (deleted the lock key): that was w{}'s lock",
                            o + 1
                        ),
                    ),
                    None => line(c, "released (deleted the lock key)".into()),
                }
            }
            Action::Pause(c) => {
                let point = if matches!(
                    before.workers[usize::from(c)].step,
                    Step::Read | Step::Compared
                ) {
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
            Action::Crash(c) => vec![
                Line::worker(now, c, "stops itself at between (SIGSTOP)"),
                Line::other(now, "lab", format!("kill -9 w{}", c + 1)),
            ],
        }
    }

    fn verdict(&self, last: &RecipeState, property: &str) -> Line {
        let text = if property == names::LIVE {
            "lab:lock exists with no expiry: nobody can take it".to_owned()
        } else {
            format!("BROKEN: {property}")
        };
        Line::other(last.now, "lab", text)
    }
}

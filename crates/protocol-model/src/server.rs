//! One Redis server's data for one lock name, and redlatch's lock scripts as
//! atomic steps on it (a script runs whole, with nothing in between).
//!
//! Each step names the `.lua` file it stands for; [`crate::scripts`] keeps
//! the hash of each file beside the step, so a changed script fails a test
//! until its step here is looked at again.

/// Times are ticks of the server's clock; a lease is a number of ticks.
pub type Tick = u8;

/// The lock hash: one owner field and its hold count, and the key's expiry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The client whose field the hash holds.
    pub owner: u8,
    /// Its hold count (re-entries add one).
    pub count: u8,
    /// The tick at which the key expires (`PEXPIRE`).
    pub deadline: Tick,
    /// The hold's fencing token, kept in the hash (`redlatch_token`): a
    /// re-entry answers it.
    pub token: u32,
    /// A waiter answered busy by this hold marked it (`redlatch_waiters`):
    /// its last release publishes the unlock message.
    pub marked: bool,
}

/// When the last release of a hold publishes the unlock message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WakeRule {
    /// Every last release publishes: Redisson's rule, redlatch's before
    /// issue 36's second round, and its release with `wake_always`
    /// (`Settings::redisson_waiters`, a give-back, queued waiters of its own).
    Always,
    /// Only the release of a hold a waiter marked when it was answered busy
    /// (`acquire.lua` marks, `release.lua` reads the mark).
    Marked,
    /// Only a marked hold's, and waiters never mark: kept to show what the
    /// mark prevents.
    Unmarked,
}

/// How a script that finds a hold already set treats its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseRule {
    /// `PEXPIRE` only when `PTTL` is shorter than the lease: no script takes
    /// back time another request set (the engine's invariant (b)).
    NeverShorten,
    /// `PEXPIRE` always: the rule before the invariant, kept to show what
    /// the invariant prevents.
    Overwrite,
}

/// What a script answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// `acquire.lua` / `reenter.lua` took or re-entered the hold. `grant`
    /// is the model's own count of fresh acquisitions (no script sees it).
    Acquired {
        /// The fencing token.
        token: u32,
        /// A fresh acquisition (`1`), not a re-entry (`2`).
        fresh: bool,
        /// Which fresh acquisition of the run this hold is.
        grant: u8,
    },
    /// `acquire.lua`: held by another owner for `pttl` more ticks.
    Busy {
        /// The remaining lease.
        pttl: Tick,
    },
    /// `release.lua`: one hold dropped; `last` when the key was deleted and
    /// the unlock message published.
    Released {
        /// The last hold: the key is gone.
        last: bool,
    },
    /// The owner does not hold the lock (expired, or another owner has it).
    NotHeld,
    /// `renew.lua`: the lease was set again.
    Renewed,
    /// Not a script's reply: the replicas did not acknowledge the
    /// acquisition (`WAIT`), so the engine undid it and the call failed.
    NotAcknowledged,
}

/// What running a script did beyond its reply: what the properties watch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// The script moved an existing key's expiry earlier.
    pub shortened: bool,
    /// The script published the unlock message.
    pub published: bool,
    /// A fresh acquisition took this token.
    pub issued: Option<u32>,
    /// A last release ended the hold of this token.
    pub ended: Option<u32>,
}

/// One server's data for one lock name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Server {
    /// The lock hash, when the key exists.
    pub hold: Option<Hold>,
    /// The fencing counter, never expires; 0: absent. Shared with every
    /// other name of the server (`redlatch_lock_token`), so it may grow
    /// between two acquisitions of this name.
    pub counter: u32,
    /// Request records (`redlatch_request:*`): request id → recorded reply.
    pub records: Vec<(u8, Reply)>,
    /// Scripts run so far: the replication offset (a replica has the
    /// master's writes up to its own count).
    pub writes: u8,
}

impl Server {
    /// Redis's expiry: a key whose deadline has come is gone.
    pub fn expire(&mut self, now: Tick) {
        if self.hold.as_ref().is_some_and(|hold| hold.deadline <= now) {
            self.hold = None;
        }
    }

    /// The reply a request record kept for `request`, if it ran before.
    pub fn recorded(&self, request: u8) -> Option<Reply> {
        self.records
            .iter()
            .find(|(id, _)| *id == request)
            .map(|(_, reply)| reply.clone())
    }

    /// Keeps `reply` as the record of `request` (the cluster wrapper's `SET ... PX`).
    pub fn record(&mut self, request: u8, reply: &Reply) {
        self.records.push((request, reply.clone()));
        self.records.sort_by_key(|(id, _)| *id);
    }

    /// `next_token` (`lib/checks.lua`): INCR the counter; an absent one
    /// starts at `clock`, the server's time in microseconds, when given
    /// (without it, at 1: the counter before issue 36).
    pub fn next_token(&mut self, clock: Option<u32>) -> u32 {
        self.counter = match (self.counter, clock) {
            (0, Some(micros)) => micros,
            (counter, _) => counter + 1,
        };
        self.counter
    }

    /// `acquire.lua`: a fresh hold (the counter's next token, HSET with the
    /// token, PEXPIRE), a re-entry of the same owner (HINCRBY, lease by
    /// `rule`, the hold's token), or busy.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        now: Tick,
        owner: u8,
        lease: Tick,
        rule: LeaseRule,
        grant: u8,
        clock: Option<u32>,
    ) -> (Reply, Effects) {
        let mut effects = Effects::default();
        match &mut self.hold {
            None => {
                let token = self.next_token(clock);
                self.hold = Some(Hold {
                    owner,
                    count: 1,
                    deadline: now + lease,
                    token,
                    marked: false,
                });
                effects.issued = Some(token);
                let reply = Reply::Acquired {
                    token,
                    fresh: true,
                    grant,
                };
                (reply, effects)
            }
            Some(hold) if hold.owner == owner => {
                hold.count += 1;
                effects.shortened = set_lease(hold, now, lease, rule);
                let reply = Reply::Acquired {
                    token: hold.token,
                    fresh: false,
                    grant,
                };
                (reply, effects)
            }
            Some(hold) => {
                // The mark is written before the busy answer leaves.
                hold.marked = true;
                (
                    Reply::Busy {
                        pttl: hold.deadline - now,
                    },
                    effects,
                )
            }
        }
    }

    /// `reenter.lua`: one more hold for an owner that holds the lock; never
    /// acquires afresh.
    pub fn reenter(
        &mut self,
        now: Tick,
        owner: u8,
        lease: Tick,
        rule: LeaseRule,
        grant: u8,
    ) -> (Reply, Effects) {
        match &mut self.hold {
            Some(hold) if hold.owner == owner => {
                hold.count += 1;
                let effects = Effects {
                    shortened: set_lease(hold, now, lease, rule),
                    ..Effects::default()
                };
                let reply = Reply::Acquired {
                    token: hold.token,
                    fresh: false,
                    grant,
                };
                (reply, effects)
            }
            _ => (Reply::NotHeld, Effects::default()),
        }
    }

    /// `release.lua`: drop one hold; the last deletes the key and publishes
    /// the unlock message as `wake` says; others re-apply the lease by
    /// `rule`. A release that finds no hold of its owner publishes when the
    /// key is gone.
    pub fn release(
        &mut self,
        now: Tick,
        owner: u8,
        lease: Tick,
        rule: LeaseRule,
        wake: WakeRule,
    ) -> (Reply, Effects) {
        let mut effects = Effects::default();
        match &mut self.hold {
            Some(hold) if hold.owner == owner && hold.count > 1 => {
                hold.count -= 1;
                effects.shortened = set_lease(hold, now, lease, rule);
                (Reply::Released { last: false }, effects)
            }
            Some(hold) if hold.owner == owner => {
                effects.published = match wake {
                    WakeRule::Always => true,
                    WakeRule::Marked => hold.marked,
                    WakeRule::Unmarked => false,
                };
                effects.ended = Some(hold.token);
                self.hold = None;
                (Reply::Released { last: true }, effects)
            }
            Some(_) => (Reply::NotHeld, effects),
            None => {
                effects.published = true;
                (Reply::NotHeld, effects)
            }
        }
    }

    /// `renew.lua`: the watchdog's renewal, when the owner still holds the lock.
    pub fn renew(
        &mut self,
        now: Tick,
        owner: u8,
        lease: Tick,
        rule: LeaseRule,
    ) -> (Reply, Effects) {
        match &mut self.hold {
            Some(hold) if hold.owner == owner => {
                let effects = Effects {
                    shortened: set_lease(hold, now, lease, rule),
                    ..Effects::default()
                };
                (Reply::Renewed, effects)
            }
            _ => (Reply::NotHeld, Effects::default()),
        }
    }
}

/// Sets the lease of a hold that exists; true when its expiry moved earlier.
fn set_lease(hold: &mut Hold, now: Tick, lease: Tick, rule: LeaseRule) -> bool {
    let wanted = now + lease;
    match rule {
        LeaseRule::NeverShorten => {
            // PTTL < lease: only then PEXPIRE.
            if hold.deadline < wanted {
                hold.deadline = wanted;
            }
            false
        }
        LeaseRule::Overwrite => {
            let shortened = wanted < hold.deadline;
            hold.deadline = wanted;
            shortened
        }
    }
}

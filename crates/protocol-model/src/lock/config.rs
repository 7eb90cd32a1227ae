//! What a run of the lock model includes: clients, leases, the lease rule,
//! fencing, request records, and how many faults of each kind may happen.

use crate::server::{LeaseRule, Tick, WakeRule};

/// How many faults of each kind a path may contain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    /// Client pauses (GC, SIGSTOP): the client and its watchdog stop.
    pub pauses: u8,
    /// Replies lost on the way back; the request is sent again (a cluster's re-send).
    pub lost_replies: u8,
    /// Requests answered NOSCRIPT and re-sent, so later requests run first.
    pub noscript: u8,
    /// Failovers to the replica, which has what was last replicated only.
    pub failovers: u8,
    /// Acquire calls cancelled (their future dropped) while in flight.
    pub cancels: u8,
    /// Unlock messages lost (a subscription connection killed).
    pub lost_messages: u8,
    /// Acquisitions of other names on the same server: each takes a token
    /// from the shared counter.
    pub other_names: u8,
    /// The counter alone vanishes (evicted, deleted by hand); the lock hash stays.
    pub counter_losses: u8,
    /// The master restarts without its data (no persistence): the hash, the
    /// counter and the request records are gone.
    pub empty_restarts: u8,
}

/// The model's parameters.
#[derive(Clone, Debug)]
pub struct Config {
    /// Clients, each wanting the lock once.
    pub clients: u8,
    /// The watchdog's lease (and the acquire's), in ticks.
    pub lease: Tick,
    /// A re-entry with this fixed lease (shorter than `lease`), if any.
    pub reentry_lease: Option<Tick>,
    /// Renewals the watchdog may send per hold.
    pub renewals: u8,
    /// How scripts treat the lease of a hold already set.
    pub rule: LeaseRule,
    /// The store refuses tokens below the highest it accepted.
    pub fenced: bool,
    /// Requests carry a request record (a cluster): a re-send runs once.
    pub request_records: bool,
    /// `wait_for_replicas`: an acquisition counts only once the replica
    /// has it (`WAIT` pipelined with the acquire); one the replica never
    /// got when it is promoted fails and is tried again.
    pub replica_ack: bool,
    /// A parked waiter tries again at the holder's lease end even without
    /// the unlock message (the engine's re-check); off only to show why.
    pub lease_end_recheck: bool,
    /// An absent counter starts at the server's time in microseconds
    /// (`next_token`, issue 36); off, at 1, as before.
    pub counter_from_clock: bool,
    /// When a guard's last release publishes the unlock message (a
    /// give-back of a cancelled acquire always does).
    pub wake: WakeRule,
    /// The faults allowed.
    pub faults: Faults,
}

impl Config {
    /// redlatch as it is: two clients, a lease of 3 ticks, never-shorten
    /// leases, fencing and request records on; no faults (add them).
    pub fn redlatch() -> Config {
        Config {
            clients: 2,
            lease: 3,
            reentry_lease: None,
            renewals: 1,
            rule: LeaseRule::NeverShorten,
            fenced: true,
            request_records: true,
            lease_end_recheck: true,
            replica_ack: false,
            counter_from_clock: true,
            wake: WakeRule::Marked,
            faults: Faults::default(),
        }
    }
}

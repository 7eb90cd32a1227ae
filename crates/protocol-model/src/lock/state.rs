//! The lock model's state: the clock, the master and its replica, the
//! requests and replies in flight, the clients, the store, and the ghost
//! facts the properties read (what happened so far, which no part of the
//! system sees).

use crate::server::{Reply, Server, Tick};
use crate::store::Store;

use super::config::Faults;

/// What a client is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Wants the lock, has not asked yet.
    Wants,
    /// An acquire request is in flight.
    Acquiring,
    /// Busy: waits for the unlock message or the holder's lease end.
    Parked {
        /// The holder's lease end as the busy reply told it.
        until: Tick,
        /// The unlock message came.
        woken: bool,
    },
    /// Holds the lock (believes so while the clock is before `believed_until`).
    Holding,
    /// Its guard saw the lock lost; it still releases its holds.
    Lost,
    /// Gave back its last hold; waits for the reply.
    Releasing,
    /// Finished.
    Done,
    /// Its acquire call was cancelled; the attempt gives back what it takes.
    Cancelled,
}

/// One client (a process with its engine and watchdog).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// What it is doing.
    pub phase: Phase,
    /// Guards it holds (re-entries add one).
    pub guards: u8,
    /// Its hold's fencing token.
    pub token: u32,
    /// Which fresh acquisition its hold is (ghost).
    pub grant: u8,
    /// The latest `sent_at + lease` of any confirmed request of the hold:
    /// `is_held()` is true before it.
    pub believed_until: Tick,
    /// What it read from the store after `is_held()` said true; it writes next.
    pub read: Option<i8>,
    /// It wrote (or skipped its write) in this hold.
    pub wrote: bool,
    /// It sent its re-entry.
    pub reentered: bool,
    /// Renewals its watchdog may still send.
    pub renewals: u8,
    /// Stopped (GC, SIGSTOP).
    pub paused: bool,
    /// Ghost: the token of the hold that last answered this client's
    /// acquire busy (no part of the system sees it).
    pub busy_on: Option<u32>,
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `acquire.lua`, a fresh acquire.
    Acquire,
    /// `reenter.lua`, a re-entry with a fixed lease.
    Reenter,
    /// `renew.lua`, the watchdog.
    Renew,
    /// `release.lua`, a guard's release.
    Release,
    /// `release.lua`, a cancelled attempt giving back its hold.
    GiveBack,
}

/// A request on its way to the server, or waiting for its re-send.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Unique per request, kept by its re-sends.
    pub id: u8,
    /// Who sent it.
    pub client: u8,
    /// What it asks.
    pub kind: Kind,
    /// The lease it carries.
    pub lease: Tick,
    /// When it was first sent (the engine's `sent_at`).
    pub sent_at: Tick,
    /// Answered NOSCRIPT: it is re-sent, and requests sent after it may run first.
    pub noscript: bool,
}

/// A reply on its way back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    /// The request answered.
    pub request: Request,
    /// The reply.
    pub reply: Reply,
    /// The master's replication offset once the script ran.
    pub offset: u8,
}

/// One step of the model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The clock advances one tick; keys whose lease ran out expire.
    Tick,
    /// A client sends an acquire (first try, or after parking).
    Acquire(u8),
    /// A holder re-enters with its fixed short lease.
    Reenter(u8),
    /// A holder's watchdog sends a renewal.
    Renew(u8),
    /// A holder checks `is_held()` and reads the store (or sees the lock lost).
    Check(u8),
    /// A holder writes `read + 1` with its token.
    Write(u8),
    /// A holder (or a client that saw its lock lost) releases one guard.
    Release(u8),
    /// The server runs request `id` (one script, atomically).
    Run(u8),
    /// The server runs release request `id`, and the unlock message is lost.
    RunLosingMessage(u8),
    /// Request `id` gets NOSCRIPT; it is loaded and re-sent.
    Noscript(u8),
    /// The reply to request `id` reaches its client.
    Deliver(u8),
    /// The reply to request `id` is lost; the request is sent again.
    LoseReply(u8),
    /// A client is stopped.
    Pause(u8),
    /// A stopped client runs again.
    Resume(u8),
    /// An acquire call is cancelled.
    Cancel(u8),
    /// The replica receives the master's writes so far.
    Replicate,
    /// The replica becomes master with what it has.
    Failover,
    /// Another name's acquisition takes a token from the shared counter.
    OtherName,
    /// The master's counter vanishes (eviction, DEL).
    LoseCounter,
    /// The master restarts empty (no persistence).
    RestartEmpty,
}

/// The whole state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockState {
    /// The server's clock (the clients' clocks run at the same rate).
    pub now: Tick,
    /// The master.
    pub master: Server,
    /// The replica: the master's data as last replicated.
    pub replica: Server,
    /// Requests sent and not yet run, in sending order.
    pub requests: Vec<Request>,
    /// Replies on their way back.
    pub answers: Vec<Answer>,
    /// The clients.
    pub clients: Vec<Client>,
    /// The shared store.
    pub store: Store,
    /// Faults still allowed.
    pub budget: Faults,
    /// The next request id.
    pub next_id: u8,
    /// Fresh acquisitions so far (ghost).
    pub grants: u8,
    /// The latest fresh acquisition a client received (ghost): the lab's
    /// "acquired", which makes earlier holders' later writes stale.
    pub received_grant: u8,
    /// The highest token a fresh acquisition took so far (ghost).
    pub last_token: u32,
    /// The server's clock in microseconds, as `TIME` reads it: it advances
    /// with the ticks, and by one at least with each token handed out (the
    /// assumption of docs/SAFETY.md: at most one token per microsecond).
    pub micros: u32,
    /// Ghost facts the properties read.
    pub history: History,
}

/// What happened so far, for the properties (no part of the system sees it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// Some client was paused.
    pub paused: bool,
    /// A failover happened, or the master restarted without its data.
    pub failed_over: bool,
    /// A failover without `wait_for_replicas` happened.
    pub unacknowledged_failover: bool,
    /// Fresh acquisitions a client received: (grant, token), by grant.
    pub received: Vec<(u8, u32)>,
    /// A received token was not above one received for an earlier
    /// acquisition, or not below one of a later one.
    pub received_token_went_back: bool,
    /// A fresh acquisition took a token not above an earlier one.
    pub token_went_back: bool,
    /// A script moved a key's expiry earlier.
    pub shortened: bool,
    /// Requests that took effect, by id; a second effect sets `ran_twice`.
    pub applied: Vec<u8>,
    /// A request took effect twice.
    pub ran_twice: bool,
    /// A request ran while one its client had sent earlier waited for its
    /// re-send after NOSCRIPT.
    pub reordered: bool,
    /// A last release did not publish while a client it had answered busy
    /// still waited for the message.
    pub lost_wakeup: bool,
}

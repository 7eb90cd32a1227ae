//! The tie between the model and the code: each script the model has a
//! step for, with the SHA-1 of the `.lua` file the step was last checked
//! against (the same digest `EVALSHA` uses for the file alone). A test
//! (`tests/scripts_tied.rs`) hashes every `.lua` file under
//! `crates/redlatch/src/` (each primitive's folder, and the shared parts in
//! `scripts/lib/`) and fails when a file changed, naming the step to re-read
//! and what to re-check.

/// One script and the model step that stands for it.
#[derive(Clone, Copy, Debug)]
pub struct Tie {
    /// The file, relative to `crates/redlatch/src/` (`lock/acquire.lua`).
    pub file: &'static str,
    /// The SHA-1 of the file when its step was last checked.
    pub sha1: &'static str,
    /// The model step (`path::function`).
    pub step: &'static str,
    /// What the step assumes of the script: what to re-check when it changes.
    pub recheck: &'static str,
}

/// Every script the model has a step for.
pub const TIES: &[Tie] = &[
    Tie {
        file: "scripts/lib/lease.lua",
        sha1: "b42807e6c1068c952cb4951a67c554e53d9651dd",
        step: "server::set_lease (LeaseRule::NeverShorten)",
        recheck: "a lease already set is only lengthened: PEXPIRE only when PTTL is shorter \
                  than the lease (a key without expiry, PTTL -1, gets the lease)",
    },
    Tie {
        file: "scripts/lib/lease_gt.lua",
        sha1: "7080f44f8c6eb53d5ec109e75cad1b00f9691ba5",
        step: "server::set_lease (LeaseRule::NeverShorten)",
        recheck: "the function library's form of scripts/lib/lease.lua, the same rule: \
                  PEXPIRE GT lengthens only, and a key without expiry (PTTL -1) gets the lease",
    },
    Tie {
        file: "scripts/lib/checks.lua",
        sha1: "52ee02f0004761c34790a614dbbf643af9f27caf",
        step: "server::Server::next_token",
        recheck: "next_token: INCR; a counter INCR finds absent (it gives 1) starts at the \
                  server's time in microseconds (TIME), never at 1; a counter that cannot give an \
                  exact token (negative, past 2^53 - 1) gives none, INCR undone; the validity \
                  checks refuse before anything is written (not modelled: the model's data is \
                  never corrupt and its counters stay small)",
    },
    Tie {
        file: "lock/acquire.lua",
        sha1: "818ac581197bb8d751be1e72194ac5192781f9b3",
        step: "server::Server::acquire",
        recheck: "a free key: the counter's next token (next_token), one hold keeping that \
                  token, the lease set; the same owner: one more hold, the hold's token, the \
                  lease only lengthened (never-shorten); another owner: busy with its PTTL, \
                  the hold marked for its waiters (redlatch_waiters, Hold::marked) before the \
                  answer leaves, nothing else written to the lock or the counter. \
                  The long waiter's claim it reads and writes (lib/precedence.lua) is modelled \
                  apart, in claims::ClaimModel::acquire: it writes only its own key and makes a \
                  free key answer busy, which adds no outcome this step's promises depend on",
    },
    Tie {
        file: "scripts/lib/precedence.lua",
        sha1: "6b1e4f663cf47b30c2e6b3b65fb012b74fd87cc6",
        step: "claims::ClaimModel::acquire",
        recheck: "a free key under another owner's claim refuses a younger owner and cuts the \
                  claim to the come-now window (never lengthens it); the claimant takes the \
                  free key and the claim out together; a held key: the long waiter claims (or \
                  renews) the next turn for keep, unless an older claim stands; a claim only \
                  refuses, never grants",
    },
    Tie {
        file: "base/reenter.lua",
        sha1: "3d6e35417be65829c52e034ff4db5240185ecfba",
        step: "server::Server::reenter",
        recheck: "only an owner that holds gets one more hold, the lease only lengthened; never \
                  acquires afresh",
    },
    Tie {
        file: "lock/release.lua",
        sha1: "411bc8776806b62822bcbccea249bd5161cf028f",
        step: "server::Server::release",
        recheck: "the last hold deletes the key and publishes when a waiter marked it or the \
                  call asks to wake always (WakeRule); others decrement and only lengthen the \
                  lease; a missing key publishes; another owner's hold is untouched",
    },
    Tie {
        file: "base/renew.lua",
        sha1: "ade087611eb7ac3b22c1e6fb22271f04dcc59255",
        step: "server::Server::renew",
        recheck: "only the owner's hold is renewed, the lease only lengthened; a missing or \
                  foreign hold answers 0 and writes nothing",
    },
    Tie {
        file: "scripts/lib/fair_line.lua",
        sha1: "01a5685b830400241e381fc24c1db3f2f2b9472b",
        step: "fair::FairModel::wake_first",
        recheck: "hand_to writes the hold to the first waiter only when it left its terms (a \
                  Redisson waiter is only woken, '0'), for the first lease its terms name, takes \
                  it out of the line and its terms, and publishes the token on its own channel; \
                  drop_dead drops a first waiter whose sign of life ran out, terms included. \
                  Terms the lock cannot use (another type, a lease of 0, past 30 days) count as \
                  none: the model's terms are the usable ones. \
                  Deadlines (Redisson's W arithmetic) are not modelled",
    },
    Tie {
        file: "fair_lock/fair_acquire.lua",
        sha1: "1e22a09d59fc6e29f9f6290883d234968cc24993",
        step: "fair::FairModel::acquire",
        recheck: "an owner that takes hand-offs and finds a hold of its own was handed it: \
                  acquired with the kept token, the lease set from now; a free lock goes to the \
                  first in line (or anyone when nobody waits); otherwise the owner joins the line \
                  (with its terms when it takes hand-offs) and, the lock free, the first waiter \
                  is woken",
    },
    Tie {
        file: "fair_lock/fair_release.lua",
        sha1: "8a72c1a3eeffe304c2b6629bf9a3db7c8d205f23",
        step: "fair::FairModel::release",
        recheck: "the last hold deletes the lock, then hands it to the first waiter (hand_to) or \
                  wakes it; a release of a lock not held wakes or hands over only when it is \
                  free; another owner's hold is untouched. A hold count that cannot be counted \
                  (bad data, not modelled) goes with its token and a plain waiter's mark",
    },
    Tie {
        file: "fair_lock/fair_leave.lua",
        sha1: "650ee44ad91125c2ddfd5a072955ac4c7e976368",
        step: "fair::FairModel::leave",
        recheck: "the owner leaves the line and its terms; an owner that takes hand-offs and is \
                  no longer in line but holds gives the hold back (it was handed it, no guard \
                  took it); then a free lock goes to (or wakes) the first waiter",
    },
    Tie {
        file: "rw_lock/rw_read_acquire.lua",
        sha1: "d8c495850f14b8f4c2bd584180969fc141ecfb78",
        step: "rwlock::RwServer::read_acquire",
        recheck: "readers share the lock; a writer holding excludes new readers; a read hold \
                  sets its own lease",
    },
    Tie {
        file: "rw_lock/rw_write_acquire.lua",
        sha1: "bc5b24c3a92ecff8b24235a9d0c4138ff80cc8e0",
        step: "rwlock::RwServer::write_acquire",
        recheck: "a writer takes the lock only when nobody holds it (or re-enters its own)",
    },
    Tie {
        file: "rw_lock/rw_read_release.lua",
        sha1: "7db518bc70f582d19e781b9018d60e327c0bb36f",
        step: "rwlock::RwServer::release",
        recheck: "a reader's release drops its hold; the last hold deletes the key and publishes",
    },
    Tie {
        file: "rw_lock/rw_write_release.lua",
        sha1: "c795fcf8d3564fbdca058b14b43250ca754665c0",
        step: "rwlock::RwServer::release",
        recheck: "the writer's release drops its hold; the last hold deletes the key and publishes",
    },
    Tie {
        file: "semaphore/semaphore_acquire.lua",
        sha1: "731594358a4ebe0cb7f6156a56e592ce8de8330f",
        step: "semaphore::Permits::acquire",
        recheck: "permits are taken only when enough are available, by DECRBY",
    },
    Tie {
        file: "semaphore/semaphore_release.lua",
        sha1: "48d4869450e0a86584728971748c68e360efcb28",
        step: "semaphore::Permits::release",
        recheck: "a release adds its permits back by INCRBY and publishes",
    },
    Tie {
        file: "deadlock/deadlock_check.lua",
        sha1: "1ab52aa43edd650b47d0293faef468067f5148d0",
        step: "deadlock::DeadlockState::check",
        recheck: "one atomic step after a busy attempt: walk from the lock's holders (their \
                  parties by party_of) along each party's wait key to the holders of the lock it \
                  names, each party visited once, bounded depth; a bounded work (steps) whose end \
                  reports no cycle, as a shorter walk would (the model's graphs stay under it); \
                  a wait key of another type is no edge; an edge whose party holds the \
                  lock it names is stale and not followed; reaching the caller's party is a cycle: \
                  the caller's own wait key deleted, no edge written, the path returned; else the \
                  caller's edge written (the lock key, PX). Only the caller's wait key is written",
    },
];

/// The scripts the model leaves out, and why.
pub const NOT_MODELLED: &[(&str, &str)] = &[
    (
        "scripts/lib/memory.lua",
        "a server out of memory is not modelled: the model's server takes every write, \
         and the wrapper only lets through writes that take no memory",
    ),
    (
        "base/force_unlock.lua",
        "force-unlock is an operator's act, outside the protocol's promises",
    ),
    (
        "semaphore/permit_acquire.lua",
        "expiring permits are not modelled (the plain semaphore is)",
    ),
    (
        "semaphore/permit_release.lua",
        "expiring permits are not modelled (the plain semaphore is)",
    ),
    (
        "semaphore/permit_renew.lua",
        "expiring permits are not modelled (the plain semaphore is)",
    ),
    ("semaphore/permit_available.lua", "reads only"),
    (
        "lock/precedence_leave.lua",
        "a claimant's withdrawal only ends its claim sooner: the claims model \
         (claims.rs) lets a claimant stop with its claim standing, the worse case",
    ),
    (
        "lock/raise_token.lua",
        "Redlock's fenced tokens are not modelled (Redlock's majority is)",
    ),
    (
        "rw_lock/rw_read_renew.lua",
        "read holds are not renewed in the model",
    ),
    (
        "rw_lock/rw_writer_leave.lua",
        "waiting writers' claims are not modelled",
    ),
    (
        "semaphore/semaphore_add.lua",
        "the permit count is set once, at the start",
    ),
    ("semaphore/semaphore_available.lua", "reads only"),
    (
        "scripts/lib/set_once.lua",
        "a count's first value (a semaphore's permits, a latch's count): the model \
         sets the permit count once, at the start, and the latch holds nothing",
    ),
    (
        "semaphore/semaphore_try_set.lua",
        "the permit count is set once, at the start",
    ),
    ("base/status.lua", "reads only"),
    (
        "count_down_latch/latch_try_set.lua",
        "the count-down latch holds nothing: no exclusion to model, and its one \
         promise (an awaiter returns once the count reads zero) is a read",
    ),
    (
        "count_down_latch/latch_count_down.lua",
        "the count-down latch holds nothing (see latch_try_set.lua)",
    ),
    (
        "count_down_latch/latch_delete.lua",
        "the count-down latch holds nothing (see latch_try_set.lua)",
    ),
    ("count_down_latch/latch_count.lua", "reads only"),
    (
        "token_lock/token_acquire_fenced.lua",
        "the token lock is the seeds' SET NX PX recipe (recipes.rs models it, \
         `set-nx-px`); its fencing counter is the lock's counter (next_token), modelled there",
    ),
    (
        "token_lock/token_release.lua",
        "the token lock's compare-and-delete: the release of the `set-nx-px` recipe (recipes.rs)",
    ),
    (
        "token_lock/token_renew.lua",
        "the token lock's compare-and-PEXPIRE renewal: renewals are not modelled for \
         string locks (the recipe holds for one lease)",
    ),
];

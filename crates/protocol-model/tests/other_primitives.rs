//! The read-write lock, the semaphore and Redlock's majority keep their
//! promises on the model; without request records a semaphore gives a
//! permit back twice. Deadlock detection reports only real cycles, and
//! every cycle within one check of each member; with the edge's DEL sent
//! late, it reports a false one.

mod common;

use redlatch_protocol_model::deadlock::{self, DeadlockModel};
use redlatch_protocol_model::redlock::{self, RedlockModel};
use redlatch_protocol_model::run::{Bound, check, find};
use redlatch_protocol_model::rwlock::{self, RwModel};
use redlatch_protocol_model::semaphore::{self, SemaphoreModel};

use common::{assert_hold, found};

#[test]
fn a_writer_excludes_readers_and_other_writers_while_readers_share() {
    let checked = check(
        RwModel { lease: 3 },
        Bound {
            default: 20,
            long: 30,
        }
        .depth(),
        2,
    );
    assert_hold(&checked, &[rwlock::names::WRITER_EXCLUSIVE]);
    // A sometimes property: its discovery is the example that readers share.
    assert!(
        checked
            .discoveries
            .contains_key(rwlock::names::READERS_SHARE),
        "two readers never held the lock together"
    );
}

#[test]
fn a_semaphore_with_request_records_gives_each_permit_back_once() {
    let model = SemaphoreModel {
        permits: 1,
        clients: 3,
        lost_replies: 2,
        request_records: true,
    };
    let checked = check(
        model,
        Bound {
            default: 30,
            long: 40,
        }
        .depth(),
        2,
    );
    assert_hold(
        &checked,
        &[
            semaphore::names::PERMITS_BOUND,
            semaphore::names::GIVEN_BACK_ONCE,
        ],
    );
}

#[test]
fn without_request_records_a_re_sent_semaphore_release_gives_a_permit_back_twice() {
    let model = SemaphoreModel {
        permits: 1,
        clients: 3,
        lost_replies: 1,
        request_records: false,
    };
    let property = semaphore::names::GIVEN_BACK_ONCE;
    let timeline = found(&find(model, property, 30), property);
    assert!(
        timeline.contains("is lost; the request is sent again"),
        "{timeline}"
    );
}

#[test]
fn redlock_majorities_never_overlap_without_a_pause() {
    let model = RedlockModel {
        lease: 3,
        pauses: 0,
    };
    let checked = check(
        model,
        Bound {
            default: 24,
            long: 30,
        }
        .depth(),
        2,
    );
    assert_hold(
        &checked,
        &[redlock::names::EXCLUSIVE, redlock::names::NO_LOST_UPDATE],
    );
}

#[test]
fn a_reported_deadlock_is_a_real_cycle_and_a_cycle_is_reported_within_a_round() {
    // 3 parties over 3 locks (the long mode: 4), explored completely, with
    // two give-ups and a wait key expiring under its waiter.
    let long =
        std::env::var_os(redlatch_protocol_model::run::LONG_MODE).is_some_and(|value| value != "0");
    let model = DeadlockModel {
        parties: if long { 4 } else { 3 },
        locks: 3,
        give_ups: 2,
        fifo: true,
        max_depth: deadlock::MAX_DEPTH,
        expiries: 1,
    };
    let checked = check(
        model,
        Bound {
            default: 60,
            long: 80,
        }
        .depth(),
        2,
    );
    assert_hold(
        &checked,
        &[
            deadlock::names::REAL_CYCLE,
            deadlock::names::REPORTED_WITHIN_A_ROUND,
            deadlock::names::ONE_REFUSED,
        ],
    );
    assert!(
        checked.discoveries.contains_key(deadlock::names::REPORTED),
        "no deadlock was ever reported"
    );
}

#[test]
fn an_edge_deleted_after_the_next_command_makes_a_false_deadlock() {
    let model = DeadlockModel {
        parties: 3,
        locks: 2,
        give_ups: 0,
        fifo: false,
        max_depth: deadlock::MAX_DEPTH,
        expiries: 0,
    };
    let property = deadlock::names::REAL_CYCLE;
    let timeline = found(&find(model, property, 30), property);
    assert!(timeline.contains("deadlock, refused"), "{timeline}");
}

#[test]
fn a_walk_shorter_than_the_cycle_leaves_it_unreported() {
    // The liveness property is not vacuous: a walk of depth 2 misses a
    // cycle of three parties.
    let model = DeadlockModel {
        parties: 3,
        locks: 3,
        give_ups: 0,
        fifo: true,
        max_depth: 2,
        expiries: 0,
    };
    let property = deadlock::names::REPORTED_WITHIN_A_ROUND;
    let timeline = found(&find(model, property, 40), property);
    assert!(timeline.contains("check: no cycle"), "{timeline}");
}

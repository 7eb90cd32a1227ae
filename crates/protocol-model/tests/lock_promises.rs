//! Every promise of docs/SAFETY.md for redlatch's lock holds on the model,
//! under the faults that promise covers, up to the bound.

mod common;

use redlatch_protocol_model::lock::{Config, Faults, LockModel, names};
use redlatch_protocol_model::run::{Bound, check};

use common::assert_hold;

fn run(config: Config, bound: Bound) -> redlatch_protocol_model::run::Checked<LockModel> {
    check(LockModel { config }, bound.depth(), 2)
}

/// Checks the model of `config` to the depth `(default, long)` (the second
/// in the long mode) and asserts that every one of `properties` holds.
fn holds(config: Config, (default, long): (usize, usize), properties: &[&str]) {
    assert_hold(&run(config, Bound { default, long }), properties);
}

#[test]
fn reordered_requests_with_a_short_reentry_keep_the_lock_exclusive_and_the_belief_sound() {
    // A re-entry with a lease shorter than the watchdog's, answered NOSCRIPT
    // and run after the renewal sent later; a lost reply re-sent.
    let mut config = Config::redlatch();
    config.reentry_lease = Some(1);
    config.faults = Faults {
        noscript: 1,
        lost_replies: 1,
        ..Faults::default()
    };
    holds(
        config,
        (16, 18),
        &[
            names::EXCLUSIVE,
            names::EXCLUSIVE_REORDERED,
            names::BELIEF_SOUND,
            names::NEVER_SHORTEN,
            names::RUNS_ONCE,
            names::TOKENS_INCREASE,
            names::TOKENS_NEVER_GO_BACK,
        ],
    );
}

#[test]
fn a_paused_holder_never_gets_an_older_token_accepted_by_the_fenced_store() {
    let mut config = Config::redlatch();
    config.faults = Faults {
        pauses: 1,
        ..Faults::default()
    };
    holds(
        config,
        (18, 20),
        &[
            names::FENCED,
            names::TOKENS_INCREASE,
            names::BELIEF_SOUND,
            names::NEVER_SHORTEN,
        ],
    );
}

#[test]
fn a_cancelled_acquire_leaves_no_hold_without_a_guard() {
    let mut config = Config::redlatch();
    config.faults = Faults {
        cancels: 1,
        lost_replies: 1,
        ..Faults::default()
    };
    holds(
        config,
        (16, 20),
        &[names::NOTHING_LEFT, names::EXCLUSIVE, names::RUNS_ONCE],
    );
}

#[test]
fn a_re_sent_release_of_a_reentered_hold_applies_once() {
    let mut config = Config::redlatch();
    config.reentry_lease = Some(3);
    config.renewals = 0;
    config.faults = Faults {
        lost_replies: 2,
        ..Faults::default()
    };
    holds(
        config,
        (18, 20),
        &[names::RUNS_ONCE, names::EXCLUSIVE, names::BELIEF_SOUND],
    );
}

#[test]
fn a_released_lock_wakes_a_waiter_even_when_the_unlock_message_is_lost() {
    // Liveness: on every path that ends, every client acquired and
    // released. Paths end because faults are finite and the clock moves
    // only while a lease or a parked waiter waits on it, so every step
    // that stays possible is eventually taken (fairness).
    let mut config = Config::redlatch();
    config.faults = Faults {
        lost_messages: 1,
        ..Faults::default()
    };
    holds(config, (20, 22), &[names::WAKES, names::EXCLUSIVE]);
}

#[test]
fn a_release_skips_the_unlock_message_only_when_no_waiter_it_turned_away_waits() {
    // Issue 36: a waiter marks the hold that answered it busy, and only a
    // marked hold's release publishes; a cancelled acquire's give-back
    // always does. Lost replies re-send the acquire that marked, or the
    // release that read the mark.
    let mut config = Config::redlatch();
    config.faults = Faults {
        cancels: 1,
        lost_replies: 1,
        ..Faults::default()
    };
    holds(
        config,
        (18, 20),
        &[names::NO_LOST_WAKEUP, names::WAKES, names::NOTHING_LEFT],
    );
}

#[test]
fn with_replica_acknowledgement_a_failover_never_leaves_two_holders_of_an_unrenewed_lock() {
    // wait_for_replicas: the acquire counts once the replica has it. Without
    // renewals nothing the holder believes is missing on the replica (the
    // known failure with a renewal is in known_failures.rs).
    let mut config = Config::redlatch();
    config.replica_ack = true;
    config.renewals = 0;
    config.faults = Faults {
        failovers: 1,
        ..Faults::default()
    };
    holds(
        config,
        (18, 22),
        &[names::EXCLUSIVE_ACROSS_FAILOVER, names::EXCLUSIVE],
    );
}

#[test]
fn tokens_never_go_back_across_other_names_a_lost_counter_an_empty_restart_and_an_acknowledged_failover()
 {
    // The shared counter (issue 36): other names move it between this
    // name's acquisitions; it vanishes alone, or with everything in an
    // empty restart, and starts again from the server's clock; a failover
    // with wait_for_replicas hands the replica's counter on. Re-entries
    // answer their hold's token, not the counter's.
    let mut config = Config::redlatch();
    config.replica_ack = true;
    config.renewals = 0;
    config.reentry_lease = Some(2);
    config.faults = Faults {
        failovers: 1,
        other_names: 2,
        counter_losses: 1,
        empty_restarts: 1,
        ..Faults::default()
    };
    holds(
        config,
        (14, 18),
        &[names::TOKENS_NEVER_GO_BACK, names::TOKENS_INCREASE],
    );
}

#[test]
fn every_fault_at_once_keeps_every_safety_promise_to_a_shallower_bound() {
    // The runs above take one fault family each, deep; this one mixes them
    // all (one of each), shallower, for the interactions between them.
    let mut config = Config::redlatch();
    config.reentry_lease = Some(1);
    config.faults = Faults {
        pauses: 1,
        lost_replies: 1,
        noscript: 1,
        failovers: 0,
        cancels: 1,
        lost_messages: 1,
        other_names: 1,
        counter_losses: 0,
        empty_restarts: 0,
    };
    holds(
        config,
        (14, 16),
        &[
            names::EXCLUSIVE,
            names::EXCLUSIVE_REORDERED,
            names::BELIEF_SOUND,
            names::NEVER_SHORTEN,
            names::RUNS_ONCE,
            names::TOKENS_INCREASE,
            names::FENCED,
            names::NOTHING_LEFT,
        ],
    );
}

#[test]
fn a_claim_never_keeps_a_free_lock_from_the_others_for_ever() {
    // A long waiter claims the next turn and may stop for good with its
    // claim standing, or be left unpolled as long as the scheduler likes.
    use redlatch_protocol_model::claims::{self, ClaimModel, ClaimRule};
    let model = ClaimModel {
        rule: ClaimRule::CutOnRefusal,
        keep: 3,
        come: 1,
        stops: 1,
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
            claims::names::EXCLUSIVE,
            claims::names::REFUSES_BRIEFLY,
            claims::names::SERVED,
        ],
    );
}

#[test]
fn the_fair_lock_hand_off_keeps_it_exclusive_and_loses_no_wake_up() {
    // A release hands the lock to the first waiter (its terms left); the
    // waiter may be dropped or die at any point of its wait, the second
    // waiter may be a Redisson one (only woken).
    use redlatch_protocol_model::fair::{self, FairModel, LeaseFrom};
    for (drops, dies, java_second) in [
        (true, false, false),
        (false, true, false),
        (true, false, true),
    ] {
        let model = FairModel {
            lease: 4,
            grant: 2,
            lease_from: LeaseFrom::LastWaitingCall,
            leave_gives_back: true,
            drops,
            dies,
            java_second,
        };
        let checked = check(
            model,
            Bound {
                default: 24,
                long: 32,
            }
            .depth(),
            2,
        );
        assert_hold(
            &checked,
            &[
                fair::names::EXCLUSIVE,
                fair::names::BORN_LIVE,
                fair::names::GIVEN_BACK,
                fair::names::SERVED,
            ],
        );
    }
}

//! Every known failure is found by the checker, with its shortest
//! counter-example printed as a timeline in the safety lab's words
//! (docs/SAFETY.md, "The counter-examples, explained").

mod common;

use redlatch_protocol_model::lock::{self, Config, Faults, LockModel};
use redlatch_protocol_model::recipes::{self, Recipe, RecipeModel};
use redlatch_protocol_model::redlock::{self, RedlockModel};
use redlatch_protocol_model::run::find;
use redlatch_protocol_model::server::{LeaseRule, WakeRule};

use common::found;

/// Depth bound of every search here: the longest counter-example is shorter.
const DEPTH: usize = 24;

#[test]
fn setnx_then_expire_with_a_crash_between_leaves_a_lock_nobody_can_take() {
    let model = RecipeModel {
        recipe: Recipe::SetnxExpire,
        lease: 3,
        pauses: 0,
        crashes: 1,
    };
    let timeline = found(
        &find(model, recipes::names::LIVE, DEPTH),
        recipes::names::LIVE,
    );
    assert!(timeline.contains("kill -9 w1"), "{timeline}");
    assert!(
        timeline.contains("lab:lock exists with no expiry: nobody can take it"),
        "{timeline}"
    );
}

#[test]
fn get_then_del_after_a_pause_deletes_the_next_holders_lock() {
    let model = RecipeModel {
        recipe: Recipe::GetDel,
        lease: 3,
        pauses: 1,
        crashes: 0,
    };
    let timeline = found(
        &find(model, recipes::names::OWN_LOCK, DEPTH),
        recipes::names::OWN_LOCK,
    );
    assert!(
        timeline.contains("stops itself at between (SIGSTOP)"),
        "{timeline}"
    );
    assert!(timeline.contains("that was w2's lock"), "{timeline}");
}

#[test]
fn set_nx_px_without_fencing_loses_an_update_under_a_pause() {
    let model = RecipeModel {
        recipe: Recipe::SetNxPx,
        lease: 3,
        pauses: 1,
        crashes: 0,
    };
    let property = recipes::names::NO_LOST_UPDATE;
    let timeline = found(&find(model, property, DEPTH), property);
    assert!(
        timeline.contains("stops itself at between (SIGSTOP)"),
        "{timeline}"
    );
    assert!(timeline.contains("is lost"), "{timeline}");
}

#[test]
fn redlock_without_fencing_loses_an_update_under_a_pause() {
    let model = RedlockModel {
        lease: 3,
        pauses: 1,
    };
    let property = redlock::names::NO_LOST_UPDATE;
    let timeline = found(&find(model, property, DEPTH), property);
    assert!(
        timeline.contains("stops itself at between (SIGSTOP)"),
        "{timeline}"
    );
    assert!(timeline.contains("is lost"), "{timeline}");
}

#[test]
fn a_failover_without_replica_acknowledgement_leaves_two_holders() {
    let mut config = Config::redlatch();
    config.faults = Faults {
        failovers: 1,
        ..Faults::default()
    };
    let property = lock::names::EXCLUSIVE_ACROSS_FAILOVER;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(timeline.contains("failover"), "{timeline}");
    assert!(
        timeline.contains("w1 and w2 believe they hold the lock"),
        "{timeline}"
    );
}

#[test]
fn a_counter_that_starts_again_at_one_gives_an_older_token_after_it_was_lost() {
    // The counter before issue 36: lost (evicted, deleted, an empty
    // restart), it started again at 1.
    let mut config = Config::redlatch();
    config.counter_from_clock = false;
    config.faults = Faults {
        counter_losses: 1,
        ..Faults::default()
    };
    let property = lock::names::TOKENS_NEVER_GO_BACK;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(timeline.contains("counter vanishes"), "{timeline}");
}

#[test]
fn with_replica_acknowledgement_a_failover_that_loses_a_renewal_leaves_two_holders() {
    // WAIT covers the acquire, not the renewals (docs/DEPLOYMENT.md): the
    // promoted replica has the acquire's shorter lease.
    let mut config = Config::redlatch();
    config.replica_ack = true;
    config.faults = Faults {
        failovers: 1,
        ..Faults::default()
    };
    let property = lock::names::EXCLUSIVE_ACROSS_FAILOVER;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(timeline.contains("watchdog renews"), "{timeline}");
    assert!(
        timeline.contains("w1 and w2 believe they hold the lock"),
        "{timeline}"
    );
}

#[test]
fn without_never_shorten_a_short_reentry_cuts_the_lease_the_hold_believes() {
    // The engine's invariant (b) removed, its belief kept: a re-entry with
    // a short fixed lease cuts the lease the acquire confirmed.
    let mut config = Config::redlatch();
    config.rule = LeaseRule::Overwrite;
    config.reentry_lease = Some(1);
    let property = lock::names::EXCLUSIVE;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(
        timeline.contains("re-enters with a fixed lease of 1"),
        "{timeline}"
    );
    assert!(
        timeline.contains("w1 and w2 believe they hold the lock"),
        "{timeline}"
    );
}

#[test]
fn without_never_shorten_a_reentry_run_late_after_noscript_leaves_two_holders() {
    // The same rule removed, on paths where a re-entry answered NOSCRIPT
    // runs after a request its client sent later: the shortest such path
    // that leaves two holders. With never-shorten the same paths keep one
    // holder (lock_promises.rs).
    let mut config = Config::redlatch();
    config.rule = LeaseRule::Overwrite;
    config.reentry_lease = Some(1);
    config.faults = Faults {
        noscript: 1,
        ..Faults::default()
    };
    let model = LockModel { config };
    let property = lock::names::EXCLUSIVE_REORDERED;
    let timeline = found(&find(model.clone(), property, DEPTH), property);
    assert!(timeline.contains("NOSCRIPT for w1's"), "{timeline}");
    assert!(
        timeline.contains("w1 and w2 believe they hold the lock"),
        "{timeline}"
    );
    let soundness = lock::names::BELIEF_SOUND;
    found(&find(model, soundness, DEPTH), soundness);
}

#[test]
fn a_fenced_store_accepts_a_paused_holders_write_that_comes_before_the_newer_holders() {
    // Fencing refuses a stale write only once a newer token was accepted:
    // a paused holder that writes after a newer holder acquired, but before
    // it wrote, is accepted, and the newer holder's write then overwrites it.
    let mut config = Config::redlatch();
    config.faults = Faults {
        pauses: 1,
        ..Faults::default()
    };
    let property = lock::names::NO_STALE_WRITE;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(
        timeline.contains("stops itself at between (SIGSTOP)"),
        "{timeline}"
    );
}

#[test]
fn without_the_lease_end_recheck_a_waiter_misses_an_unlock_published_before_it_parked() {
    // The engine re-checks a parked waiter at the holder's lease end: an
    // unlock message can come before the waiter parks, or be lost.
    let mut config = Config::redlatch();
    config.lease_end_recheck = false;
    let property = lock::names::WAKES;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(
        timeline.contains("lock busy: waits for the unlock message"),
        "{timeline}"
    );
}

#[test]
fn without_request_records_a_re_sent_release_runs_twice() {
    let mut config = Config::redlatch();
    config.request_records = false;
    config.reentry_lease = Some(3);
    config.renewals = 0;
    config.faults = Faults {
        lost_replies: 1,
        ..Faults::default()
    };
    let property = lock::names::RUNS_ONCE;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(
        timeline.contains("is lost; the request is sent again"),
        "{timeline}"
    );
}

#[test]
fn a_claim_that_only_lapses_refuses_a_free_lock_past_the_come_now_window() {
    // Before issue 35: a claimant that does not come (stopped, or polled
    // rarely) held the free lock back until its claim lapsed.
    use redlatch_protocol_model::claims::{ClaimModel, ClaimRule, names};
    let model = ClaimModel {
        rule: ClaimRule::LapseOnly,
        keep: 3,
        come: 1,
        stops: 1,
    };
    let timeline = found(
        &find(model, names::REFUSES_BRIEFLY, DEPTH),
        names::REFUSES_BRIEFLY,
    );
    assert!(timeline.contains("claims the next turn"), "{timeline}");
    assert!(timeline.contains("refused"), "{timeline}");
}

#[test]
fn a_claim_that_never_lapses_keeps_a_free_lock_from_a_waiter_for_ever() {
    // What the claim's expiry is for: a claimant that stops would otherwise
    // keep the free lock from everyone.
    use redlatch_protocol_model::claims::{ClaimModel, ClaimRule, names};
    let model = ClaimModel {
        rule: ClaimRule::NeverLapse,
        keep: 3,
        come: 1,
        stops: 1,
    };
    let timeline = found(&find(model, names::SERVED, DEPTH), names::SERVED);
    assert!(timeline.contains("stops"), "{timeline}");
}

#[test]
fn without_the_waiters_mark_a_release_that_skips_the_message_leaves_a_waiter_to_the_lease_end() {
    // A release publishes only for a hold a waiter marked (issue 36): a
    // waiter turned away without marking would wait for the holder's lease
    // to end, though the lock was free long before.
    let mut config = Config::redlatch();
    config.wake = WakeRule::Unmarked;
    let property = lock::names::NO_LOST_WAKEUP;
    let timeline = found(&find(LockModel { config }, property, DEPTH), property);
    assert!(
        timeline.contains("publishes nothing, though a waiter it turned away waits for it"),
        "{timeline}"
    );
}

/// The fair lock's hand-off with one rule changed: where a handed guard
/// counts its lease from, or whether a leave gives a handed hold back.
fn fair_model(
    lease_from: redlatch_protocol_model::fair::LeaseFrom,
    leave_gives_back: bool,
) -> redlatch_protocol_model::fair::FairModel {
    redlatch_protocol_model::fair::FairModel {
        lease: 4,
        grant: 2,
        lease_from,
        leave_gives_back,
        drops: !leave_gives_back,
        dies: false,
        java_second: false,
    }
}

#[test]
fn a_handed_guard_that_counts_its_lease_from_the_message_outlives_the_hold() {
    // The hold is written by the release; the message is read later. A
    // guard counting its lease from the reading believes past the lease.
    use redlatch_protocol_model::fair::{LeaseFrom, names};
    let model = fair_model(LeaseFrom::MessageRead, true);
    let timeline = found(&find(model, names::EXCLUSIVE, DEPTH), names::EXCLUSIVE);
    assert!(timeline.contains("reads the hand-off"), "{timeline}");
}

#[test]
fn a_handed_guard_that_takes_a_lapsed_hand_off_for_a_live_one_outlives_the_hold() {
    // Found by the model while the hand-off was written: the hold handed
    // over lapsed before the waiter's next attempt ran (which found it
    // waiting again); the message read after it counted the lease from
    // that attempt. The token is now checked against the counter the
    // attempt read.
    use redlatch_protocol_model::fair::{LeaseFrom, names};
    let model = fair_model(LeaseFrom::LastWaitingCallUnchecked, true);
    let timeline = found(&find(model, names::EXCLUSIVE, DEPTH), names::EXCLUSIVE);
    assert!(timeline.contains("reads the hand-off"), "{timeline}");
}

#[test]
fn a_hand_off_read_after_its_hold_lapsed_is_taken_for_a_guard_born_expired() {
    // Found by the red team (2026-11-29) in a test first: a waiter that
    // reads its hand-off message only after the handed hold lapsed (its
    // task not polled meanwhile) took it for a guard whose lease, counted
    // from its last attempt, had ended: acquire returned a lock it did not
    // hold. The waiter now attempts instead once half the handed lease is gone.
    use redlatch_protocol_model::fair::{LeaseFrom, names};
    let model = fair_model(LeaseFrom::LastWaitingCallAnyAge, true);
    let timeline = found(&find(model, names::BORN_LIVE, DEPTH), names::BORN_LIVE);
    assert!(timeline.contains("reads the hand-off"), "{timeline}");
}

#[test]
fn a_leave_that_keeps_a_handed_hold_leaves_it_to_nobody() {
    // A waiter dropped after the release handed it the lock: unless its
    // leave gives the hold back, nobody releases it (it lapses at its lease).
    use redlatch_protocol_model::fair::{LeaseFrom, names};
    let model = fair_model(LeaseFrom::LastWaitingCall, false);
    let timeline = found(&find(model, names::GIVEN_BACK, DEPTH), names::GIVEN_BACK);
    assert!(timeline.contains("handed to w2"), "{timeline}");
}

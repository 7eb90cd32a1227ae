//! The fair lock's scripts (`fair_*.lua`, beside this file): acquire
//! or take a place in line, release to the head of the line, leave the
//! line. It renews, re-enters and reads its status with the reentrant
//! lock's.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating};

// `fair_line` hands the lock over with the checks' and memory's helpers:
// they come before it.
mutating!(
    FAIR_ACQUIRE,
    "fair_lock/fair_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks,
    memory,
    fair_line,
    lease
);
mutating!(
    FAIR_RELEASE,
    "fair_lock/fair_release.lua",
    GIVES_BACK,
    checks,
    memory,
    fair_line,
    lease
);
mutating!(
    FAIR_LEAVE,
    "fair_lock/fair_leave.lua",
    GIVES_BACK,
    checks,
    memory,
    fair_line
);

/// The fair lock's part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[&FAIR_ACQUIRE, &FAIR_RELEASE, &FAIR_LEAVE],
    plain: &[],
};

//! The count-down latch's scripts (`latch_*.lua`, beside this file):
//! set the count once, count down, read, delete.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(
    LATCH_TRY_SET,
    "count_down_latch/latch_try_set.lua",
    ANSWERS_UNDER_OOM,
    checks,
    set_once
);
mutating!(
    LATCH_COUNT_DOWN,
    "count_down_latch/latch_count_down.lua",
    GIVES_BACK,
    checks,
    memory
);
mutating!(
    LATCH_DELETE,
    "count_down_latch/latch_delete.lua",
    GIVES_BACK,
    checks
);
script!(
    LATCH_COUNT,
    "count_down_latch/latch_count.lua",
    GIVES_BACK,
    checks
);

/// The latch's part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[&LATCH_TRY_SET, &LATCH_COUNT_DOWN, &LATCH_DELETE],
    plain: &[&LATCH_COUNT],
};

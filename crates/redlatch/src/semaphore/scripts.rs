//! The semaphores' scripts (`crates/redlatch/scripts/semaphore_*.lua` and
//! `permit_*.lua`): `Semaphore`'s count and `PermitSemaphore`'s count and
//! expiring permits.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(
    SEMAPHORE_TRY_SET,
    "semaphore_try_set.lua",
    ANSWERS_UNDER_OOM
);
mutating!(
    SEMAPHORE_ADD,
    "semaphore_add.lua",
    ANSWERS_UNDER_OOM,
    memory
);
mutating!(
    SEMAPHORE_ACQUIRE,
    "semaphore_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks
);
mutating!(
    SEMAPHORE_RELEASE,
    "semaphore_release.lua",
    GIVES_BACK,
    memory
);
script!(SEMAPHORE_AVAILABLE, "semaphore_available.lua", GIVES_BACK);

mutating!(
    PERMIT_ACQUIRE,
    "permit_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks
);
mutating!(PERMIT_RELEASE, "permit_release.lua", GIVES_BACK);
script!(PERMIT_AVAILABLE, "permit_available.lua", GIVES_BACK);
script!(PERMIT_RENEW, "permit_renew.lua", GIVES_BACK, memory);

/// Both semaphores' part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[
        &SEMAPHORE_TRY_SET,
        &SEMAPHORE_ADD,
        &SEMAPHORE_ACQUIRE,
        &SEMAPHORE_RELEASE,
        &PERMIT_ACQUIRE,
        &PERMIT_RELEASE,
    ],
    plain: &[&SEMAPHORE_AVAILABLE, &PERMIT_AVAILABLE, &PERMIT_RENEW],
};

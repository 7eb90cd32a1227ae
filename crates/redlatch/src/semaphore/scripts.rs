//! The semaphores' scripts (`semaphore_*.lua` and `permit_*.lua`, beside
//! this file): `Semaphore`'s count and `PermitSemaphore`'s count and
//! expiring permits.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(
    SEMAPHORE_TRY_SET,
    "semaphore/semaphore_try_set.lua",
    ANSWERS_UNDER_OOM,
    checks,
    set_once
);
mutating!(
    SEMAPHORE_ADD,
    "semaphore/semaphore_add.lua",
    ANSWERS_UNDER_OOM,
    checks,
    memory
);
mutating!(
    SEMAPHORE_ACQUIRE,
    "semaphore/semaphore_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks
);
mutating!(
    SEMAPHORE_RELEASE,
    "semaphore/semaphore_release.lua",
    GIVES_BACK,
    checks,
    memory
);
script!(
    SEMAPHORE_AVAILABLE,
    "semaphore/semaphore_available.lua",
    GIVES_BACK,
    checks
);

mutating!(
    PERMIT_ACQUIRE,
    "semaphore/permit_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks
);
mutating!(PERMIT_RELEASE, "semaphore/permit_release.lua", GIVES_BACK);
script!(
    PERMIT_AVAILABLE,
    "semaphore/permit_available.lua",
    GIVES_BACK,
    checks
);
script!(
    PERMIT_RENEW,
    "semaphore/permit_renew.lua",
    GIVES_BACK,
    memory
);

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

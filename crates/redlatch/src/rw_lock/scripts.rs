//! The read-write lock's scripts (`rw_*.lua`, beside this file):
//! acquire and release either side, renew read holds, withdraw a writer's
//! claim. Its writer renews and re-enters with the reentrant lock's.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(
    RW_READ_ACQUIRE,
    "rw_lock/rw_read_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks,
    lease
);
mutating!(
    RW_WRITE_ACQUIRE,
    "rw_lock/rw_write_acquire.lua",
    ANSWERS_UNDER_OOM,
    checks,
    lease,
    memory
);
mutating!(
    RW_READ_RELEASE,
    "rw_lock/rw_read_release.lua",
    GIVES_BACK,
    checks,
    lease,
    memory
);
mutating!(
    RW_WRITE_RELEASE,
    "rw_lock/rw_write_release.lua",
    GIVES_BACK,
    checks,
    lease,
    memory
);
mutating!(RW_WRITER_LEAVE, "rw_lock/rw_writer_leave.lua", GIVES_BACK);
script!(
    RW_READ_RENEW,
    "rw_lock/rw_read_renew.lua",
    GIVES_BACK,
    lease
);

/// The read-write lock's part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[
        &RW_READ_ACQUIRE,
        &RW_WRITE_ACQUIRE,
        &RW_READ_RELEASE,
        &RW_WRITE_RELEASE,
        &RW_WRITER_LEAVE,
    ],
    plain: &[&RW_READ_RENEW],
};

//! The scripts every lock kind that keeps its hold in a lock hash field
//! shares (the `.lua` files beside this one): re-enter and renew a hold,
//! read the status of a lock of any kind, and force a lock free (the
//! reentrant and the token lock). The reentrant lock's `ScriptList`
//! (`lock/scripts.rs`) registers them.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, mutating, script};

mutating!(
    REENTER,
    "base/reenter.lua",
    ANSWERS_UNDER_OOM,
    checks,
    lease
);
script!(RENEW, "base/renew.lua", GIVES_BACK, lease);
script!(STATUS, "base/status.lua", GIVES_BACK, checks);
mutating!(FORCE_UNLOCK, "base/force_unlock.lua", GIVES_BACK);

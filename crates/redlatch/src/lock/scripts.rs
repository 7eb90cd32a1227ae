//! The reentrant lock's scripts (the `.lua` files beside this one), as the
//! function library loads them: acquire, release, raise the fencing
//! counter, and withdraw a claim to the next turn. Their keys,
//! arguments and replies are in the table of `scripts/mod.rs` and each
//! file's header.

use crate::base::scripts::{FORCE_UNLOCK, REENTER, RENEW, STATUS};
use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(
    ACQUIRE,
    "lock/acquire.lua",
    ANSWERS_UNDER_OOM,
    checks,
    lease,
    precedence
);
mutating!(
    RELEASE,
    "lock/release.lua",
    GIVES_BACK,
    checks,
    lease,
    memory
);
// Part of a Redlock acquire: the counters written back before the guard
// is handed out.
script!(RAISE_TOKEN, "lock/raise_token.lua", ANSWERS_UNDER_OOM);
script!(
    PRECEDENCE_LEAVE,
    "lock/precedence_leave.lua",
    GIVES_BACK,
    precedence
);

/// The lock's part of the function library. It registers the scripts every
/// lock kind shares (`base/scripts.rs`) too, in the places they always had:
/// the library is named after its content in order, so a server keeps the
/// library it has.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[&ACQUIRE, &REENTER, &RELEASE, &FORCE_UNLOCK],
    plain: &[&RENEW, &STATUS, &RAISE_TOKEN, &PRECEDENCE_LEAVE],
};

/// The acquire and release scripts exactly as the library loads them on
/// one server (shared parts in front): for tools that send them by
/// themselves, such as the benchmark harness's `redis-benchmark` limit. Not
/// a stable interface: `Lock::script_sources`.
pub(crate) fn lock_script_sources() -> (&'static str, &'static str) {
    (ACQUIRE.plain_source(), RELEASE.plain_source())
}

//! The token lock's scripts (`token_*.lua`, beside this file): the
//! fallbacks where the server lacks the plain commands (release, renewal),
//! and the fenced acquire.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, ScriptList, mutating, script};

mutating!(TOKEN_RELEASE, "token_lock/token_release.lua", GIVES_BACK);
script!(TOKEN_RENEW, "token_lock/token_renew.lua", GIVES_BACK);
mutating!(
    TOKEN_ACQUIRE_FENCED,
    "token_lock/token_acquire_fenced.lua",
    ANSWERS_UNDER_OOM,
    checks
);

/// The token lock's part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[&TOKEN_RELEASE, &TOKEN_ACQUIRE_FENCED],
    plain: &[&TOKEN_RENEW],
};

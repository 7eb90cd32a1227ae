//! The scripts every lock kind that keeps its hold in a lock hash field
//! shares (`crates/redlatch/scripts/*.lua`): re-enter and renew a hold, and
//! read the status of a lock of any kind. The reentrant lock's
//! `ScriptList` (`lock/scripts.rs`) registers them.

use crate::scripts::{ANSWERS_UNDER_OOM, GIVES_BACK, mutating, script};

mutating!(REENTER, "reenter.lua", ANSWERS_UNDER_OOM, checks, lease);
script!(RENEW, "renew.lua", GIVES_BACK, lease);
script!(STATUS, "status.lua", GIVES_BACK, checks);

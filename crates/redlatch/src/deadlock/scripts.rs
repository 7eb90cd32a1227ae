//! Deadlock detection's script (`deadlock_check.lua`, beside this file),
//! as the function library loads it. It writes one expiring key, the
//! caller's wait-for edge, and may run twice harmlessly (the same walk, the
//! same edge): a plain script, never wrapped re-send-safe.

use crate::scripts::{GIVES_BACK, ScriptList, script};

// Run under OOM too: its one write is small and expires, and a check that
// could not run costs the caller nothing but the detection.
script!(
    DEADLOCK_CHECK,
    "deadlock/deadlock_check.lua",
    GIVES_BACK,
    checks
);

/// Deadlock detection's part of the function library.
pub(crate) static SCRIPTS: ScriptList = ScriptList {
    mutating: &[],
    plain: &[&DEADLOCK_CHECK],
};

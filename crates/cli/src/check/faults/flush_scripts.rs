//! `flush-scripts`: `SCRIPT FLUSH` on the lock server (as a restart or a
//! failover to a fresh replica would): cached scripts must be reloaded.

use super::kind::FaultKind;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// `SCRIPT FLUSH`.
pub struct FlushScripts;

impl FaultKind for FlushScripts {
    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        if recipe.uses_scripts {
            Ok(())
        } else {
            Err("uses no scripts or subscriptions")
        }
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock.admin(redis::cmd("SCRIPT").arg("FLUSH"))
    }
}

//! `kill-subscribers`: `CLIENT KILL TYPE pubsub` on the lock server: a
//! waiter that sleeps on a release message must not sleep forever.

use super::kind::FaultKind;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// `CLIENT KILL TYPE pubsub`.
pub struct KillSubscribers;

impl FaultKind for KillSubscribers {
    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        if recipe.uses_scripts {
            Ok(())
        } else {
            Err("uses no scripts or subscriptions")
        }
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock
            .admin(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub"))
    }
}

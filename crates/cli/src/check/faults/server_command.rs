//! `flush-scripts` and `kill-subscribers`: one command sent to the lock
//! server, to a recipe that uses scripts or subscriptions. `SCRIPT FLUSH`
//! (as a restart or a failover to a fresh replica would): cached scripts
//! must be reloaded. `CLIENT KILL TYPE pubsub`: a waiter that sleeps on a
//! release message must not sleep forever.

use super::kind::FaultKind;
use crate::check::recipes::info::Info;
use crate::check::workload::lab::Lab;

/// A command run on the lock server at each injection.
pub struct ServerCommand {
    name: &'static str,
    args: &'static [&'static str],
}

/// `flush-scripts`: `SCRIPT FLUSH`.
pub const FLUSH_SCRIPTS: ServerCommand = ServerCommand {
    name: "SCRIPT",
    args: &["FLUSH"],
};

/// `kill-subscribers`: `CLIENT KILL TYPE pubsub`.
pub const KILL_SUBSCRIBERS: ServerCommand = ServerCommand {
    name: "CLIENT",
    args: &["KILL", "TYPE", "pubsub"],
};

impl FaultKind for ServerCommand {
    fn applies(&self, recipe: &Info) -> Result<(), &'static str> {
        if recipe.uses_scripts {
            Ok(())
        } else {
            Err("uses no scripts or subscriptions")
        }
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.lock.admin(redis::cmd(self.name).arg(self.args))
    }
}

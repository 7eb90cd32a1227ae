//! The faults the lab injects. Each is one file implementing
//! [`FaultKind`] (faults that differ in one value share one: `partition.rs`,
//! `restart_master.rs`, `server_command.rs`); [`Fault`] names them (`check/fault.rs`) and [`Fault::kind`]
//! below finds each one's file.
//!
//! Adding a fault: a new file here implementing [`FaultKind`], its name and
//! help text in `check/fault.rs`, and its `mod` line and one arm in `kind` below.
//! Then say what each recipe promises under it (`recipes/*.rs`).

mod clock_jump;
mod crash_between;
mod failover;
mod kill_client;
pub mod kind;
mod latency;
mod none;
mod partition;
mod pause_client;
mod pause_redis;
mod restart_master;
mod restart_redis;
mod restart_redis_late;
mod server_command;

use std::time::Duration;

pub use kind::FaultKind;

use crate::check::fault::Fault;
use crate::check::recipes::info::Info;

impl Fault {
    /// What the fault does: the registry, one arm per fault.
    pub fn kind(self) -> &'static dyn FaultKind {
        match self {
            Fault::None => &none::NoFault,
            Fault::PauseClient => &pause_client::PauseClient,
            Fault::KillClient => &kill_client::KillClient,
            Fault::CrashBetween => &crash_between::CrashBetween,
            Fault::PauseRedis => &pause_redis::PauseRedis,
            Fault::RestartRedis => &restart_redis::RestartRedis,
            Fault::RestartRedisLate => &restart_redis_late::RestartRedisLate,
            Fault::FlushScripts => &server_command::FLUSH_SCRIPTS,
            Fault::KillSubscribers => &server_command::KILL_SUBSCRIBERS,
            Fault::ClockJump => &clock_jump::ClockJump,
            Fault::Partition => &partition::BOTH_WAYS,
            Fault::PartitionOneWay => &partition::ONE_WAY,
            Fault::Latency => &latency::Latency,
            Fault::Failover => &failover::Failover,
            Fault::RestartMaster => &restart_master::AT_ONCE,
            Fault::RestartMasterLate => &restart_master::LATE,
        }
    }

    /// Whether the fault means anything for `recipe`; if not, why.
    pub fn applies(self, recipe: &Info) -> Result<(), &'static str> {
        // Replicas exist only in a Sentinel group.
        if recipe.replicas_only && !self.kind().needs().sentinel {
            return Err("needs replicas: runs under failover only");
        }
        self.kind().applies(recipe)
    }

    /// How long nobody can be expected to acquire because of one injection.
    pub fn outage(self, lease: Duration) -> Duration {
        self.kind().outage(lease)
    }

    /// Time between two injections.
    pub fn period(self, lease: Duration) -> Duration {
        self.outage(lease) + lease + Duration::from_millis(300)
    }

    /// The shortest lease the fault is run with.
    pub fn lease_floor(self) -> Duration {
        self.kind().lease_floor()
    }

    /// The shortest run the fault needs.
    pub fn duration_floor(self) -> Duration {
        self.kind().duration_floor()
    }
}

#[cfg(test)]
mod tests {
    use crate::check::recipes::RecipeName;

    use super::*;

    #[test]
    fn a_recipe_that_needs_replicas_applies_under_failover_only() {
        for recipe in RecipeName::DEFAULT {
            if !recipe.info().replicas_only {
                continue;
            }
            for &fault in Fault::ALL {
                assert_eq!(
                    fault.applies(&recipe.info()).is_ok(),
                    fault == Fault::Failover,
                    "{} under {}",
                    recipe.name(),
                    fault.name()
                );
            }
        }
    }
}

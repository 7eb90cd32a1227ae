//! The faults by name: what `--fault` accepts, what reports print and what
//! each recipe's promise table matches on. What a fault does is in its own
//! file, found through the registry in `faults/mod.rs`.

use clap::ValueEnum;
use serde::Serialize;

/// Declares [`Fault`] from one line per fault: its help text (shown by
/// `--help`), variant and name. Kept as one list so that a new fault's name
/// is written once.
macro_rules! vocabulary {
    ($( $(#[doc = $doc:literal])* $variant:ident = $name:literal, )*) => {
        /// A fault injected during a run, repeatedly (see [`Fault::period`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
        pub enum Fault {
            $(
                $(#[doc = $doc])*
                #[value(name = $name)]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl Fault {
            /// Every fault, in table order.
            pub const ALL: &'static [Fault] = &[$(Fault::$variant),*];

            /// The name used on the command line and in reports.
            pub fn name(self) -> &'static str {
                match self {
                    $(Fault::$variant => $name,)*
                }
            }
        }
    };
}

vocabulary! {
    /// No fault: the baseline.
    None = "none",
    /// Stop a holder with SIGSTOP at its worst moment (after its last check,
    /// before its write) for 2.5 leases, then SIGCONT.
    PauseClient = "pause-client",
    /// Kill a holder with SIGKILL while it holds the lock.
    KillClient = "kill-client",
    /// Kill a worker between the two commands of a two-command step.
    CrashBetween = "crash-between",
    /// Stop the lock server with SIGSTOP for 2 leases.
    PauseRedis = "pause-redis",
    /// Kill the lock server with SIGKILL and restart it empty at once.
    RestartRedis = "restart-redis",
    /// Kill the lock server, wait 2 leases, restart it empty.
    RestartRedisLate = "restart-redis-late",
    /// `SCRIPT FLUSH` on the lock server.
    FlushScripts = "flush-scripts",
    /// `CLIENT KILL TYPE pubsub` on the lock server.
    KillSubscribers = "kill-subscribers",
    /// Move the lock server's wall clock 10 leases forward (libfaketime).
    ClockJump = "clock-jump",
    /// Cut a holder off from every lock server (both ways) for 2.5 leases
    /// while it goes on working, then heal: it writes past its lease.
    Partition = "partition",
    /// The same, one way: the holder's requests still reach the lock
    /// servers, their replies are dropped, for 2.5 leases; then heal.
    PartitionOneWay = "partition-one-way",
    /// 50 ms ± 20 ms each way and 5% loss on every link between the
    /// workers and the lock servers, from 0.3 s to the end of the run.
    Latency = "latency",
    /// A Sentinel group: the master is killed right after it granted a lock
    /// it has not replicated; a replica is promoted.
    Failover = "failover",
    /// Redlock with each worker reaching only three masters of five: the
    /// master a holder shares with the next worker restarts empty at once.
    RestartMaster = "restart-master",
    /// The same, but the master stays down for 1.5 leases before it comes
    /// back empty (Redis's "delayed restart" rule).
    RestartMasterLate = "restart-master-late",
}

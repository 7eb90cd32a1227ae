//! The faults the lab injects, and when.

use std::time::Duration;

use clap::ValueEnum;

use serde::Serialize;

/// A fault injected during a run, repeatedly (see [`Fault::period`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// No fault: the baseline.
    None,
    /// Stop a holder with SIGSTOP at its worst moment (after its last check,
    /// before its write) for 2.5 leases, then SIGCONT.
    PauseClient,
    /// Kill a holder with SIGKILL while it holds the lock.
    KillClient,
    /// Kill a worker between the two commands of a two-command step.
    CrashBetween,
    /// Stop the lock server with SIGSTOP for 2 leases.
    PauseRedis,
    /// Kill the lock server with SIGKILL and restart it empty at once.
    RestartRedis,
    /// Kill the lock server, wait 2 leases, restart it empty.
    RestartRedisLate,
    /// `SCRIPT FLUSH` on the lock server.
    FlushScripts,
    /// `CLIENT KILL TYPE pubsub` on the lock server.
    KillSubscribers,
    /// Move the lock server's wall clock 10 leases forward (libfaketime).
    ClockJump,
    /// Cut a holder off from every lock server (both ways) for 2.5 leases
    /// while it goes on working, then heal: it writes past its lease.
    Partition,
    /// The same, one way: the holder's requests still reach the lock
    /// servers, their replies are dropped, for 2.5 leases; then heal.
    PartitionOneWay,
    /// 50 ms ± 20 ms each way and 5% loss on every link between the
    /// workers and the lock servers, from 0.3 s to the end of the run.
    Latency,
    /// A Sentinel group: the master is killed right after it granted a lock
    /// it has not replicated; a replica is promoted.
    Failover,
    /// Redlock with each worker reaching only three masters of five: the
    /// master a holder shares with the next worker restarts empty at once.
    RestartMaster,
    /// The same, but the master stays down for 1.5 leases before it comes
    /// back empty (Redis's "delayed restart" rule).
    RestartMasterLate,
}

/// Where a worker stops itself when the lab armed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Point {
    /// Right after taking the lock.
    Holding,
    /// After the recipe's last check, just before the write.
    BeforeWrite,
    /// Between the first and second command of a two-command step.
    Between,
}

/// What the lab does to a worker that stopped itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGCONT after this long.
    ResumeAfter(Duration),
    /// SIGKILL, and start a new worker in its place.
    Kill,
    /// Cut it off from the lock servers, SIGCONT it at once, heal after this long.
    CutOff(Duration),
    /// Drop the lock servers' replies to it, SIGCONT it at once, heal after this long.
    CutReplies(Duration),
    /// Restart empty the master it shares with another worker (at once, or
    /// after this long down), SIGCONT it at once.
    RestartShared(Duration),
    /// Kill the Sentinel group's master (its grant unreplicated), SIGCONT it.
    KillMaster,
}

impl Point {
    /// The name used on the worker's command line and in timelines.
    pub fn name(self) -> &'static str {
        match self {
            Point::Holding => "holding",
            Point::BeforeWrite => "before-write",
            Point::Between => "between",
        }
    }
}

impl Fault {
    /// Every fault, in table order.
    pub const ALL: [Fault; 16] = [
        Fault::None,
        Fault::PauseClient,
        Fault::KillClient,
        Fault::CrashBetween,
        Fault::PauseRedis,
        Fault::RestartRedis,
        Fault::RestartRedisLate,
        Fault::FlushScripts,
        Fault::KillSubscribers,
        Fault::ClockJump,
        Fault::Partition,
        Fault::PartitionOneWay,
        Fault::Latency,
        Fault::Failover,
        Fault::RestartMaster,
        Fault::RestartMasterLate,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        fault_name(self)
    }

    /// For faults a worker does to itself: what the lab does once it has stopped.
    pub fn worker_action(self, lease: Duration) -> Option<Action> {
        match self {
            Fault::PauseClient => Some(Action::ResumeAfter(lease * 5 / 2)),
            Fault::KillClient | Fault::CrashBetween => Some(Action::Kill),
            Fault::Partition => Some(Action::CutOff(lease * 5 / 2)),
            Fault::PartitionOneWay => Some(Action::CutReplies(lease * 5 / 2)),
            Fault::RestartMaster | Fault::RestartMasterLate => {
                Some(Action::RestartShared(self.outage(lease)))
            }
            Fault::Failover => Some(Action::KillMaster),
            _ => None,
        }
    }

    /// Where the worker stops itself for this fault; `pause_point` is the
    /// recipe's own worst moment for a pause.
    pub fn point(self, pause_point: Point) -> Option<Point> {
        match self {
            Fault::PauseClient => Some(pause_point),
            Fault::KillClient
            | Fault::Partition
            | Fault::PartitionOneWay
            | Fault::RestartMaster
            | Fault::RestartMasterLate
            | Fault::Failover => Some(Point::Holding),
            Fault::CrashBetween => Some(Point::Between),
            _ => None,
        }
    }

    /// How long nobody can be expected to acquire because of one injection.
    pub fn outage(self, lease: Duration) -> Duration {
        match self {
            Fault::PauseClient | Fault::Partition | Fault::PartitionOneWay => lease * 5 / 2,
            Fault::PauseRedis | Fault::RestartRedisLate => lease * 2,
            Fault::RestartMasterLate => lease * 3 / 2,
            // Sentinel's detection and election.
            Fault::Failover => Duration::from_secs(3),
            _ => Duration::ZERO,
        }
    }

    /// Time between two injections.
    pub fn period(self, lease: Duration) -> Duration {
        self.outage(lease) + lease + Duration::from_millis(300)
    }

    /// Whether the fault is injected once and stays for the rest of the run.
    pub fn once(self) -> bool {
        // A failover uses up the group's one replica.
        matches!(self, Fault::Latency | Fault::Failover)
    }

    /// The shortest lease the fault is run with: a failover takes Sentinel
    /// a few seconds, and the old holder must still believe it holds when
    /// the promoted replica grants the lock again (production leases are
    /// 10-30 s; a failover takes seconds).
    pub fn lease_floor(self) -> Duration {
        match self {
            Fault::Failover => Duration::from_secs(10),
            _ => Duration::ZERO,
        }
    }

    /// The shortest run the fault needs: the failover and a lease after it.
    pub fn duration_floor(self) -> Duration {
        match self {
            Fault::Failover => Duration::from_secs(6),
            _ => Duration::ZERO,
        }
    }

    /// Whether the workers reach the lock servers through the lab's proxies.
    pub fn uses_proxies(self) -> bool {
        matches!(
            self,
            Fault::Partition
                | Fault::PartitionOneWay
                | Fault::Latency
                | Fault::RestartMaster
                | Fault::RestartMasterLate
        )
    }
}

fn fault_name(fault: Fault) -> &'static str {
    match fault {
        Fault::None => "none",
        Fault::PauseClient => "pause-client",
        Fault::KillClient => "kill-client",
        Fault::CrashBetween => "crash-between",
        Fault::PauseRedis => "pause-redis",
        Fault::RestartRedis => "restart-redis",
        Fault::RestartRedisLate => "restart-redis-late",
        Fault::FlushScripts => "flush-scripts",
        Fault::KillSubscribers => "kill-subscribers",
        Fault::ClockJump => "clock-jump",
        Fault::Partition => "partition",
        Fault::PartitionOneWay => "partition-one-way",
        Fault::Latency => "latency",
        Fault::Failover => "failover",
        Fault::RestartMaster => "restart-master",
        Fault::RestartMasterLate => "restart-master-late",
    }
}

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
    pub const ALL: [Fault; 10] = [
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
            _ => None,
        }
    }

    /// Where the worker stops itself for this fault; `pause_point` is the
    /// recipe's own worst moment for a pause.
    pub fn point(self, pause_point: Point) -> Option<Point> {
        match self {
            Fault::PauseClient => Some(pause_point),
            Fault::KillClient => Some(Point::Holding),
            Fault::CrashBetween => Some(Point::Between),
            _ => None,
        }
    }

    /// How long nobody can be expected to acquire because of one injection.
    pub fn outage(self, lease: Duration) -> Duration {
        match self {
            Fault::PauseClient => lease * 5 / 2,
            Fault::PauseRedis | Fault::RestartRedisLate => lease * 2,
            _ => Duration::ZERO,
        }
    }

    /// Time between two injections.
    pub fn period(self, lease: Duration) -> Duration {
        self.outage(lease) + lease + Duration::from_millis(300)
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
    }
}

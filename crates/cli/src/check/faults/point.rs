//! Where a worker stops itself when the lab armed it: the moment a fault
//! done to a worker hits.

use clap::ValueEnum;

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

//! A worker's fault points (where it stops itself when the lab armed it:
//! the moment a fault done to a worker hits) and its event log.
//!
//! The lab arms a worker with `SIGUSR1`; the next time the worker reaches
//! the point its fault names, it logs `stopping` and stops itself with
//! `SIGSTOP`. The lab sees it stopped and resumes or kills it. Stopping at
//! the exact point (between two commands, between the last check and the
//! write) makes each counter-example reproducible on demand.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clap::ValueEnum;
use nix::sys::signal::{Signal, raise};

use crate::check::event::{EventLog, What};

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

/// The worker's fault point, whether it is armed, and its event log.
pub struct Points {
    point: Option<Point>,
    armed: Arc<AtomicBool>,
    log: Mutex<EventLog>,
}

impl Points {
    /// A worker that stops at `point` when armed; `armed` is set by its
    /// `SIGUSR1` handler.
    pub fn new(point: Option<Point>, armed: Arc<AtomicBool>, log: EventLog) -> Points {
        Points {
            point,
            armed,
            log: Mutex::new(log),
        }
    }

    /// Logs `what` as happening now.
    pub fn log(&self, what: What) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .log(what);
    }

    /// The worker is at `point`: stop here if armed for it. True when it
    /// stopped (and the lab let it run again).
    pub fn reach(&self, point: Point) -> bool {
        if self.point == Some(point) && self.armed.swap(false, Ordering::SeqCst) {
            self.log(What::Stopping {
                point: point.name().to_owned(),
            });
            // Stops every thread of the process until the lab's SIGCONT.
            let _ = raise(Signal::SIGSTOP);
            self.log(What::Continued);
            true
        } else {
            false
        }
    }
}

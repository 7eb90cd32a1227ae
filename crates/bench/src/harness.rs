//! What every measure shares: the harness run's windows and repetitions,
//! and the single-master server the measures run against.

use std::time::Duration;

use testkit::RedisServer;

/// Windows and repetitions of one harness run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub runs: usize,
    pub window: Duration,
    pub contend_window: Duration,
    pub headline_window: Duration,
    /// Locks held by one client in measure 9.
    pub held: usize,
    /// Their lease.
    pub held_lease: Duration,
    /// Whether measure 9's client watches its holds (the default).
    pub held_watch: bool,
    pub quick: bool,
}

/// What every measure shares: the settings and the single-master server.
pub struct Bench {
    pub settings: Settings,
    pub server: RedisServer,
}

impl Bench {
    pub fn url(&self) -> String {
        self.server.url()
    }
}

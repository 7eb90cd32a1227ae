//! One lock in a refresh of `top`: the row the table draws and `--json`
//! prints. Its own file, below the sampler that makes rows and the table
//! that draws them.

use serde::Serialize;

use crate::locks::LockView;

/// One lock in a refresh: `status --json`'s object, and what `top` adds.
#[derive(Debug, Clone, Serialize)]
pub struct TopLock {
    /// The lock as `status --json` shows it.
    #[serde(flatten)]
    pub lock: LockView,
    /// `lock`, `read-write` or `fair` (a fair lock shows as such while
    /// someone is in its line).
    pub kind: &'static str,
    /// Waiting clients, or the fair lock's places in line.
    pub waiters: u64,
    /// Fresh acquisitions per second since the previous refresh (from the
    /// fencing token's growth); `null` on the first refresh of a lock.
    pub acquisitions_per_s: Option<f64>,
    /// How long the lock has had waiters without a break, as seen by this
    /// watcher (to within one interval); 0 when nobody waits.
    pub longest_wait_ms: u64,
}

impl TopLock {
    /// The holders for people, each with what it says about itself first;
    /// `DEADLOCK` before them when the lock is on a wait-for cycle, and who
    /// waits for it after them.
    pub fn holders_text(&self) -> String {
        // The mark first: a narrow terminal shortens this column at its end.
        let mark = if self.lock.cycle.is_some() {
            "DEADLOCK "
        } else {
            ""
        };
        let text = format!(
            "{mark}{}{}",
            self.lock.holders_text(),
            self.lock.waits_text()
        );
        match &self.lock.masters {
            Some(masters) if self.lock.held => format!(
                "{text} ({}/{} masters)",
                self.lock.holding_masters(),
                masters.nodes.len()
            ),
            Some(masters) => format!("no majority ({} needed)", masters.quorum),
            None => text,
        }
    }
}

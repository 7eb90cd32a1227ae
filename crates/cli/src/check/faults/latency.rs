//! `latency`: a slow, lossy network between every worker and the lock
//! servers, from the first injection to the end of the run.

use super::kind::{FaultKind, Needs};
use crate::check::workload::lab::Lab;
use crate::check::workload::links::SLOW;

/// 50 ms ± 20 ms each way and 5% loss on every link.
pub struct Latency;

impl FaultKind for Latency {
    fn needs(&self) -> Needs {
        Needs {
            proxies: true,
            ..Needs::default()
        }
    }

    fn once(&self) -> bool {
        true
    }

    fn inject(&self, lab: &mut Lab) -> Result<(), String> {
        lab.injected_now();
        lab.links.set_all(SLOW);
        Ok(())
    }
}

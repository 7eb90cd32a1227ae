//! `none`: the baseline, nothing injected.

use super::kind::FaultKind;
use crate::check::workload::lab::Lab;

/// No fault.
pub struct NoFault;

impl FaultKind for NoFault {
    fn inject(&self, _lab: &mut Lab) -> Result<(), String> {
        Ok(())
    }
}

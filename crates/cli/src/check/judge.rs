//! One cell, run and judged: the table and the soak both make theirs here.

use std::time::Duration;

use super::checker;
use super::report::Cell;
use super::verdict::{self, Status};
use super::workload::cell::{self as cell_run, Setup};

/// Runs one recipe under one fault and judges it.
pub fn run_cell(setup: &Setup, progress: &dyn Fn(f64)) -> Cell {
    let info = setup.recipe.info();
    let promised = (info.promises)(setup.fault);
    let mut cell = Cell {
        recipe: setup.recipe,
        fault: setup.fault,
        status: Status::NotApplicable,
        promised,
        lease_ms: millis(setup.lease),
        duration_ms: millis(setup.duration),
        note: None,
        findings: None,
    };
    if let Err(why) = setup.fault.applies(&info) {
        cell.note = Some(why.to_owned());
        return cell;
    }
    match cell_run::run(setup, progress) {
        Ok(run) => {
            let stuck_after =
                setup.lease * 3 + setup.fault.outage(setup.lease) + Duration::from_secs(1);
            let findings = checker::check(&run, stuck_after, setup.lease);
            cell.status = verdict::judge(promised, &findings);
            cell.findings = Some(findings);
        }
        Err(reason) => {
            // A machine without libfaketime cannot run the cell at all.
            cell.status = if setup.fault.kind().needs().clock {
                Status::Unavailable
            } else {
                Status::Error
            };
            cell.note = Some(reason);
        }
    }
    cell
}

/// Milliseconds, for reports.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

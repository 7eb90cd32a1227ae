//! Running one recipe under one fault: servers, worker processes, faults.

pub mod cell;
mod inject;
pub mod points;
mod procs;
pub mod worker;

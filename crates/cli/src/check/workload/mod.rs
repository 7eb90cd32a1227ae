//! Running one recipe under one fault: servers, worker processes, faults.

pub mod cell;
mod failover;
mod inject;
mod links;
pub mod points;
mod procs;
pub mod worker;

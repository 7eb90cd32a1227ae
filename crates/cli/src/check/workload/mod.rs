//! Running one recipe under one fault: servers, worker processes, faults.

pub mod cell;
pub mod failover;
pub mod lab;
pub mod links;
mod lock_server;
mod procs;
pub mod worker;

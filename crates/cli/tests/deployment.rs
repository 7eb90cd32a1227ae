//! Every command against every kind of deployment, named by flags or by the
//! settings file: one server, a 3-master Redis Cluster, a Sentinel group,
//! three Redlock masters; and TLS with ACL users. All real processes.

mod common;

#[path = "deployment/harness.rs"]
mod harness;
#[path = "deployment/security.rs"]
mod security;
#[path = "deployment/topologies.rs"]
mod topologies;

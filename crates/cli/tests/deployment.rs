//! Every command against every kind of deployment, named by flags or by the
//! settings file: one server, a 3-master Redis Cluster, a Sentinel group,
//! three Redlock masters; TLS with ACL users; and `top` watching them. All
//! real processes.

mod common;

#[path = "deployment/harness.rs"]
mod harness;
#[path = "deployment/security.rs"]
mod security;
#[path = "deployment/top.rs"]
mod top;
#[path = "deployment/topologies.rs"]
mod topologies;

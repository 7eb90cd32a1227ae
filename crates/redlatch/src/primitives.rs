//! The primitives' registry: what each primitive adds to the function
//! library, one line per primitive. A new primitive declares its scripts in
//! its own folder (`scripts.rs`: `mutating!`/`script!` lines and a
//! [`ScriptList`]) and registers them here.

use crate::scripts::{Lua, ScriptList};

/// Every primitive's scripts: one line each.
pub(crate) static PRIMITIVES: &[&ScriptList] = &[
    &crate::lock::scripts::SCRIPTS,
    &crate::fair_lock::scripts::SCRIPTS,
    &crate::rw_lock::scripts::SCRIPTS,
    &crate::semaphore::scripts::SCRIPTS,
];

/// Every script of every primitive, each form once: the function library's content.
pub(crate) fn every_script() -> Vec<&'static Lua> {
    PRIMITIVES.iter().flat_map(|list| list.scripts()).collect()
}

//! The primitives' registry: what each primitive adds to the function
//! library, one line per primitive. A new primitive declares its scripts in
//! its own folder (`scripts.rs`: `mutating!`/`script!` lines and a
//! [`ScriptList`]) and registers them here.

use std::sync::LazyLock;

use crate::scripts::library_source::LibrarySource;
use crate::scripts::{Lua, ScriptList};
use crate::transport::script_routes::FunctionLibrary;

/// Every primitive's scripts: one line each.
pub(crate) static PRIMITIVES: &[&ScriptList] = &[
    &crate::lock::scripts::SCRIPTS,
    &crate::fair_lock::scripts::SCRIPTS,
    &crate::rw_lock::scripts::SCRIPTS,
    &crate::semaphore::scripts::SCRIPTS,
    &crate::token_lock::scripts::SCRIPTS,
];

/// Every script of every primitive, each form once: the function library's content.
pub(crate) fn every_script() -> Vec<&'static Lua> {
    PRIMITIVES.iter().flat_map(|list| list.scripts()).collect()
}

/// The function library of every primitive's scripts, built once.
static LIBRARY: LazyLock<LibrarySource> = LazyLock::new(|| LibrarySource::of(&every_script()));

/// The function library a client hands its connection at connect.
pub(crate) fn library() -> FunctionLibrary {
    LIBRARY.handle()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_holds_every_script_under_a_name_of_its_content() {
        crate::scripts::library_source::tests::holds_every_script(&LIBRARY, &every_script());
    }
}

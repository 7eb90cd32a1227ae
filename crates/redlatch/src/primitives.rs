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
    &crate::count_down_latch::scripts::SCRIPTS,
    &crate::token_lock::scripts::SCRIPTS,
    &crate::deadlock::scripts::SCRIPTS,
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
    fn no_script_that_changes_data_needs_a_shebang() {
        // Wrapped re-send-safe, a body runs inside a function: script
        // flags (a shebang must stay the first line) would be lost.
        for source in PRIMITIVES.iter().flat_map(|list| list.mutating_bodies()) {
            assert!(!source.starts_with("#!"));
        }
    }

    #[test]
    fn every_function_is_named_after_its_file_alone() {
        // Declarations name their files by folder (`lock/acquire.lua`);
        // the function keeps the bare file name, as FCALL calls it.
        for lua in every_script() {
            assert!(
                lua.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{}",
                lua.name
            );
        }
    }

    #[test]
    fn the_library_holds_every_script_under_a_name_of_its_content() {
        crate::scripts::library_source::tests::holds_every_script(&LIBRARY, &every_script());
    }
}

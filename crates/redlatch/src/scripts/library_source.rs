//! The function library's text, built from the scripts the primitives
//! register (`crate::primitives`): every script as one function, named after
//! the library, and the library named after its content
//! (`redlatch_<12 hex>`), so clients of different redlatch versions each
//! load and call their own, side by side.

use redis::Script;

use crate::scripts::lua::Lua;
use crate::transport::script_routes::FunctionLibrary;

/// The library's name and source.
pub(crate) struct LibrarySource {
    name: String,
    source: String,
}

/// The lease rule as the scripts carry it, and in the form functions use:
/// every server with functions has `PEXPIRE GT`, which lengthens a lease in
/// one call where the portable form reads the TTL first.
const LEASE: &str = include_str!("lib/lease.lua");
const LEASE_GT: &str = include_str!("lib/lease_gt.lua");

/// What a script of this source runs as a function.
fn function_body(source: &str) -> String {
    source.replacen(LEASE, LEASE_GT, 1)
}

/// The script `lua` as the library's local `redlatch_script_{n}`: its
/// shared parts (local functions only) run once, when the library loads,
/// and the callback closes over them, so a call creates none of them again.
fn function_text(n: usize, lua: &Lua) -> String {
    format!(
        "local redlatch_script_{n}\ndo\n{}redlatch_script_{n} = function(KEYS, ARGV)\n{}\nend\nend\n",
        function_body(lua.parts),
        lua.body
    )
}

impl LibrarySource {
    /// The library of `scripts`, each a function.
    pub(crate) fn of(scripts: &[&Lua]) -> LibrarySource {
        let bodies: Vec<String> = scripts
            .iter()
            .enumerate()
            .map(|(n, lua)| function_text(n, lua))
            .collect();
        // Named after what it holds: the SHA-1 of every function's name, body and flags.
        let content: String = scripts
            .iter()
            .zip(&bodies)
            .map(|(lua, body)| {
                format!(
                    "{} {} {:?}\n",
                    lua.name,
                    Script::new(body).get_hash(),
                    lua.flags
                )
            })
            .collect();
        let name = format!("redlatch_{}", &Script::new(&content).get_hash()[..12]);
        let mut source = format!("#!lua name={name}\n");
        for (n, (lua, body)) in scripts.iter().zip(&bodies).enumerate() {
            let flags: Vec<String> = lua.flags.iter().map(|flag| format!("'{flag}'")).collect();
            source.push_str(&format!(
                "{body}\
                 redis.register_function{{function_name='{name}_{}', callback=redlatch_script_{n}, flags={{{}}}}}\n",
                lua.name,
                flags.join(", "),
            ));
        }
        LibrarySource { name, source }
    }

    /// The library as a connection is handed it.
    pub(crate) fn handle(&'static self) -> FunctionLibrary {
        FunctionLibrary {
            name: &self.name,
            source: &self.source,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks that `library`, made of `scripts`, holds every one under a
    /// name of its content, and functions with `PEXPIRE GT`.
    pub(crate) fn holds_every_script(library: &LibrarySource, scripts: &[&Lua]) {
        assert!(
            scripts.iter().any(|lua| lua.source.contains(LEASE)),
            "no script carries the lease rule"
        );
        let name = &library.name;
        assert!(name.starts_with("redlatch_") && name.len() == "redlatch_".len() + 12);
        for lua in scripts {
            let registered = format!("function_name='{name}_{}'", lua.name);
            assert!(
                library.source.contains(&registered),
                "{} is not in the library",
                lua.name
            );
            if lua.source.contains(LEASE) {
                let text = function_text(0, lua);
                assert!(
                    text.contains("'GT'") && !text.contains(LEASE),
                    "{} keeps the portable lease rule in the library",
                    lua.name
                );
            }
            assert!(
                lua.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{:?} is not a valid function name",
                lua.name
            );
        }
    }
}

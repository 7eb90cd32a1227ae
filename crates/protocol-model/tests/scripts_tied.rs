//! Model and code stay tied: a script that changed since its model step was
//! last checked fails here, naming the step and what to re-check; a script
//! the model neither models nor explains leaving out fails too. So does a
//! library file that docs/ARCHITECTURE.md's table leaves out or names wrongly.

#[path = "scripts_tied/architecture.rs"]
mod architecture;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use redlatch_protocol_model::scripts::{NOT_MODELLED, TIES};

/// Where the scripts live: each primitive's folder holds its own `.lua`
/// files, and `scripts/lib/` the shared parts.
fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../redlatch/src")
}

/// Every `.lua` file under `dir`, relative to `root`, `/`-separated.
fn lua_files(root: &Path, dir: &Path, into: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            lua_files(root, &path, into);
        } else if path.extension().is_some_and(|ext| ext == "lua") {
            let relative = path.strip_prefix(root).expect("under the root");
            into.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn every_modelled_script_is_the_one_its_step_was_checked_against() {
    let mut changed = Vec::new();
    for tie in TIES {
        let path = scripts_dir().join(tie.file);
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let sha1 = sha1_smol::Sha1::from(&text).digest().to_string();
        if sha1 != tie.sha1 {
            changed.push(format!(
                "crates/redlatch/src/{} changed (SHA-1 {sha1}, recorded {}): re-read the model step \
                 `{}` (crates/protocol-model/src/) and re-check: {}. Then record the new SHA-1 in \
                 crates/protocol-model/src/scripts.rs.",
                tie.file,
                if tie.sha1.is_empty() { "none" } else { tie.sha1 },
                tie.step,
                tie.recheck
            ));
        }
    }
    assert!(changed.is_empty(), "\n{}\n", changed.join("\n\n"));
}

#[test]
fn every_script_is_modelled_or_explained() {
    let mut on_disk = BTreeSet::new();
    lua_files(&scripts_dir(), &scripts_dir(), &mut on_disk);
    let known: BTreeSet<String> = TIES
        .iter()
        .map(|tie| tie.file.to_owned())
        .chain(NOT_MODELLED.iter().map(|(file, _)| (*file).to_owned()))
        .collect();
    let unknown: Vec<_> = on_disk.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "scripts neither modelled nor listed in NOT_MODELLED (crates/protocol-model/src/scripts.rs): {unknown:?}"
    );
    let gone: Vec<_> = known
        .iter()
        .filter(|file| !scripts_dir().join(file).is_file())
        .collect();
    assert!(
        gone.is_empty(),
        "scripts the model names that no longer exist: {gone:?}"
    );
}

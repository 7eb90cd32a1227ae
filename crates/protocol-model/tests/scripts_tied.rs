//! Model and code stay tied: a script that changed since its model step was
//! last checked fails here, naming the step and what to re-check; a script
//! the model neither models nor explains leaving out fails too. So does a
//! library file that docs/ARCHITECTURE.md's table leaves out or names wrongly.

#[path = "scripts_tied/architecture.rs"]
mod architecture;

use std::collections::BTreeSet;
use std::path::PathBuf;

use redlatch_protocol_model::scripts::{NOT_MODELLED, TIES};

fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../redlatch/scripts")
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
                "crates/redlatch/scripts/{} changed (SHA-1 {sha1}, recorded {}): re-read the model step \
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
    let on_disk: BTreeSet<String> = std::fs::read_dir(scripts_dir())
        .expect("the scripts directory")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".lua"))
        .collect();
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

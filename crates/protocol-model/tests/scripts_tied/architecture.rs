//! docs/ARCHITECTURE.md and the library's tree stay tied: every file the
//! table of "Inside the library" names exists under `crates/redlatch/src/`,
//! and every source file there has its row.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files named in the first column of the library's table: each
/// backquoted `.rs` path of a row (a row may name several).
fn listed(architecture: &str) -> BTreeSet<String> {
    let section = architecture
        .split("\n## ")
        .find(|section| section.starts_with("Inside the library"))
        .expect("docs/ARCHITECTURE.md has a section \"Inside the library\"");
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .filter(|path| path.ends_with(".rs") && !path.starts_with(".."))
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir`, relative to `root`.
fn sources(root: &Path, dir: &Path, into: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(root, &path, into);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(root).expect("under the root");
            into.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_architecture_table_lists_every_library_file_and_no_other() {
    let doc_path = workspace().join("docs/ARCHITECTURE.md");
    let architecture = std::fs::read_to_string(&doc_path).expect("docs/ARCHITECTURE.md");
    let listed = listed(&architecture);
    let src = workspace().join("crates/redlatch/src");
    let mut on_disk = BTreeSet::new();
    sources(&src, &src, &mut on_disk);

    let gone: Vec<_> = listed.difference(&on_disk).collect();
    let unlisted: Vec<_> = on_disk.difference(&listed).collect();
    assert!(
        gone.is_empty() && unlisted.is_empty(),
        "docs/ARCHITECTURE.md, \"Inside the library\": rows for files that do not exist: \
         {gone:?}; files of crates/redlatch/src without a row: {unlisted:?}"
    );
}

//! The `--config` file: reading its settings, and the exit-78 failure for
//! a file the library refused. Below `global` and `connect`, which both
//! read it.

use std::path::Path;

use redlatch::Settings;

use crate::exit::{self, Failure};

/// Reads `--config` if given: exit 78 when it cannot be read or is invalid.
pub fn load_settings(config: Option<&Path>) -> Result<Settings, Failure> {
    match config {
        None => Ok(Settings::default()),
        Some(path) => Settings::load(path).map_err(|error| config_failure(path, &error)),
    }
}

/// The exit-78 failure for a settings file the library refused.
pub fn config_failure(path: &Path, error: &redlatch::Error) -> Failure {
    let text = error.to_string();
    // The library names the file in most messages; add it where it does not.
    if text.contains(&*path.to_string_lossy()) {
        Failure::new(exit::CONFIG, format!("config {text}"))
    } else {
        Failure::new(exit::CONFIG, format!("config {}: {text}", path.display()))
    }
}

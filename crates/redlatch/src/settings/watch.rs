//! Keeping a client's settings in step with a TOML file while it runs
//! (the config listener of seed 003, for a file instead of Apollo).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use crate::error::{Error, Result};
use crate::settings::{ApplySettings, Settings};
use crate::sync::unpoisoned::Mutex;

/// Editors save in bursts (truncate, write, rename): wait for quiet first.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// Applies changes of a settings file to a running [`Client`](crate::Client)
/// until dropped. Made by [`Client::watch_settings`](crate::Client::watch_settings).
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub struct SettingsWatcher {
    path: PathBuf,
    state: Arc<WatchState>,
    _debouncer: Debouncer<RecommendedWatcher>,
}

#[derive(Default)]
struct WatchState {
    last_error: Mutex<Option<String>>,
    reloads: AtomicU64,
    /// The file's text when last read: reading the file is itself an event
    /// for some watchers, so only a change of text counts.
    last_text: Mutex<Option<String>>,
}

/// Adjusts settings read from the file before they are applied.
pub(crate) type Adjust = Arc<dyn Fn(&mut Settings) + Send + Sync>;

impl std::fmt::Debug for SettingsWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsWatcher")
            .field("path", &self.path)
            .field("reloads", &self.reloads())
            .field("last_error", &self.last_error())
            .finish()
    }
}

impl SettingsWatcher {
    pub(crate) fn start(
        target: Arc<dyn ApplySettings>,
        path: &Path,
        adjust: Adjust,
    ) -> Result<SettingsWatcher> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::InvalidConfig(format!("{}: {error}", path.display())))?;
        let mut settings = parse(path, &text)?;
        adjust(&mut settings);
        target.apply_settings(settings)?;
        // Watch the directory, not the file: editors often replace the file
        // (write a new one, rename it over), which ends a watch on the old inode.
        let path = std::path::absolute(path)
            .map_err(|error| Error::InvalidConfig(format!("{}: {error}", path.display())))?;
        let directory = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let state = Arc::new(WatchState {
            last_text: Mutex::new(Some(text)),
            ..WatchState::default()
        });
        let handler = Reloader {
            target: Arc::downgrade(&target),
            path: path.clone(),
            state: state.clone(),
            adjust,
        };
        let mut debouncer = new_debouncer(DEBOUNCE, move |events: DebounceEventResult| {
            handler.handle(events)
        })
        .map_err(|error| {
            Error::InvalidConfig(format!("cannot watch {}: {error}", path.display()))
        })?;
        debouncer
            .watcher()
            .watch(&directory, RecursiveMode::NonRecursive)
            .map_err(|error| {
                Error::InvalidConfig(format!("cannot watch {}: {error}", directory.display()))
            })?;
        Ok(SettingsWatcher {
            path,
            state,
            _debouncer: debouncer,
        })
    }

    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Changes applied since the watcher started.
    pub fn reloads(&self) -> u64 {
        self.state.reloads.load(Ordering::Acquire)
    }

    /// Why the last change was refused, if it was (cleared by a good one).
    pub fn last_error(&self) -> Option<String> {
        self.state.last_error.lock().clone()
    }
}

/// Runs on the watcher's thread for each debounced batch of events.
struct Reloader {
    target: Weak<dyn ApplySettings>,
    path: PathBuf,
    state: Arc<WatchState>,
    adjust: Adjust,
}

impl Reloader {
    fn handle(&self, events: DebounceEventResult) {
        let touched = match events {
            Ok(events) => events.iter().any(|event| event.path == self.path),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "redlatch: settings watch error");
                false
            }
        };
        let Some(target) = self.target.upgrade() else {
            return;
        };
        if !touched {
            return;
        }
        let text = match self.read_settled() {
            Ok(text) => text,
            Err(error) => {
                // Mid-rename, or deleted: keep what is in force, and read it
                // again at the next event whatever it then holds.
                *self.state.last_text.lock() = None;
                self.refuse(format!("{}: {error}", self.path.display()));
                return;
            }
        };
        {
            let mut last = self.state.last_text.lock();
            if last.as_deref() == Some(text.as_str()) {
                return;
            }
            *last = Some(text.clone());
        }
        let applied = parse(&self.path, &text).and_then(|mut settings| {
            (self.adjust)(&mut settings);
            target.apply_settings(settings)
        });
        match applied {
            Ok(()) => {
                tracing::info!(path = %self.path.display(), "redlatch: settings reloaded");
                *self.state.last_error.lock() = None;
                self.state.reloads.fetch_add(1, Ordering::AcqRel);
            }
            Err(error) => self.refuse(error.to_string()),
        }
    }

    /// The file's text. An empty file is read again after another
    /// [`DEBOUNCE`]: a save that truncates and then writes can be caught in
    /// between (a loaded machine delays the write past the debounce), and
    /// applying that moment would put every default in force.
    fn read_settled(&self) -> std::io::Result<String> {
        let text = std::fs::read_to_string(&self.path)?;
        if !text.trim().is_empty() {
            return Ok(text);
        }
        std::thread::sleep(DEBOUNCE);
        std::fs::read_to_string(&self.path)
    }

    fn refuse(&self, reason: String) {
        let mut last_error = self.state.last_error.lock();
        if last_error.as_deref() != Some(reason.as_str()) {
            tracing::warn!(path = %self.path.display(), error = %reason, "redlatch: settings file refused; keeping the settings in force");
        }
        *last_error = Some(reason);
    }
}

/// Parses the file's text, naming the file in errors.
fn parse(path: &Path, text: &str) -> Result<Settings> {
    Settings::from_toml(text).map_err(|error| match error {
        Error::InvalidConfig(reason) => {
            Error::InvalidConfig(format!("{}: {reason}", path.display()))
        }
        other => other,
    })
}

//! How a connection's scripts reach the server: as functions of redlatch's
//! library, or by EVALSHA. Shared by the connection's clones, so one
//! refusal turns the whole client.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The function library a connection's scripts are functions of, handed to
/// it at connect: its name (each function is `<name>_<script>`) and its
/// source, what `FUNCTION LOAD` takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FunctionLibrary {
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
}

/// Whether scripts run as functions (FCALL) on this connection, and of
/// which library.
#[derive(Debug, Default)]
pub(crate) struct ScriptRoutes {
    functions: AtomicBool,
    library: OnceLock<FunctionLibrary>,
}

impl ScriptRoutes {
    /// True when scripts run as functions of the loaded library.
    pub(crate) fn functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    /// Sets the route; true when this changed it.
    pub(crate) fn set_functions(&self, on: bool) -> bool {
        self.functions.swap(on, Ordering::Relaxed) != on
    }

    /// The library handed over at connect, if any.
    pub(crate) fn library(&self) -> Option<FunctionLibrary> {
        self.library.get().copied()
    }

    /// The library to call scripts as functions of, while they run so.
    pub(crate) fn function_library(&self) -> Option<FunctionLibrary> {
        self.library().filter(|_| self.functions())
    }

    /// Hands the library over (once: a connection's library never changes).
    pub(crate) fn set_library(&self, library: FunctionLibrary) {
        let _ = self.library.set(library);
    }
}

//! How a connection's scripts reach the server: as functions of redlatch's
//! library, or by EVALSHA. Shared by the connection's clones, so one
//! refusal turns the whole client.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether scripts run as functions (FCALL) on this connection.
#[derive(Debug, Default)]
pub(crate) struct ScriptRoutes {
    functions: AtomicBool,
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
}

//! The state every lock of one client shares: the connection, the settings,
//! the runtime, the client id, and the background tasks (wake-ups, renewal).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sync::unpoisoned::RwLock;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

#[cfg(feature = "holder-records")]
use crate::engine::identity::IdentityPublisher;
use crate::engine::loss_watch::LossWatch;
use crate::engine::owner_field::{OwnerPrefix, Tail};
use crate::engine::wakeup::Wakeups;
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, Result};
#[cfg(feature = "holder-records")]
use crate::scripts::holder_keys::record_key;
use crate::scripts::library;
use crate::settings::{ApplySettings, Settings, SharedSettings};
use crate::sync::Spawner;
use crate::transport::capabilities::{self, Capabilities, Support};
use crate::transport::connection::{self, Connection};
#[cfg(feature = "holder-records")]
use crate::transport::detached::Detached;
use crate::transport::idle;
use crate::transport::no_evict;
use crate::transport::script_routes::FunctionLibrary;
use crate::transport::topology::{ReplicaWait, Topology};

/// Which server features a client uses where the server offers them
/// (`ClientBuilder::script_functions`, `watch_holds`, `no_evict`,
/// `holder_identity`, `holder_purpose`).
#[derive(Debug, Clone)]
pub(crate) struct Features {
    pub(crate) script_functions: bool,
    pub(crate) watch_holds: bool,
    pub(crate) no_evict: bool,
    /// A server without scripting is accepted where it serves the token lock.
    pub(crate) token_lock_without_scripting: bool,
    /// Waiters check for wait-for cycles (`ClientBuilder::deadlock_detection`).
    pub(crate) deadlock_detection: bool,
    #[cfg(feature = "holder-records")]
    pub(crate) holder_identity: bool,
    #[cfg(feature = "holder-records")]
    pub(crate) holder_purpose: Option<String>,
}

impl Default for Features {
    fn default() -> Features {
        Features {
            script_functions: true,
            watch_holds: true,
            no_evict: true,
            token_lock_without_scripting: false,
            deadlock_detection: false,
            #[cfg(feature = "holder-records")]
            holder_identity: true,
            #[cfg(feature = "holder-records")]
            holder_purpose: None,
        }
    }
}

/// What a `Client` and its clones share; every lock and guard holds it.
pub(crate) struct Core {
    pub(crate) id: Uuid,
    pub(crate) conn: Connection,
    /// What the server offered at connect.
    pub(crate) capabilities: Capabilities,
    /// Replicas that must confirm each acquisition, if any.
    pub(crate) replica_wait: Option<ReplicaWait>,
    pub(crate) settings: SharedSettings,
    pub(crate) wakeups: Wakeups,
    pub(crate) watchdog: Watchdog,
    /// Starts the background rest of calls whose callers went away, and
    /// undos, on the client's runtime; counts those not yet ended.
    pub(crate) background: Spawner,
    /// Source of anonymous owner names: one fresh owner per acquisition.
    owner_seq: AtomicU64,
    /// What every anonymous owner of this client starts with: a hold keeps
    /// only its numbers (`engine/owner_field.rs`).
    owner_prefix: Arc<OwnerPrefix>,
    /// Waiters check for wait-for cycles (`crate::deadlock`).
    pub(crate) deadlock_detection: bool,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Core {
    // As the client it belongs to: primitives print it as theirs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("settings", &*self.settings.read())
            .finish_non_exhaustive()
    }
}

impl Core {
    /// Connects and starts the background tasks.
    pub(crate) async fn open(
        url: &str,
        settings: Settings,
        topology: &Topology,
        replica_wait: Option<ReplicaWait>,
        features: Features,
        library: FunctionLibrary,
    ) -> Result<Core> {
        let limit = settings.response_timeout;
        let settings: SharedSettings = Arc::new(RwLock::new(Arc::new(settings)));
        let (conn, subscriptions, watch_source) =
            connection::open(url, topology, &settings, replica_wait).await?;
        let capabilities = learn_capabilities(&conn, &features, library, limit, &settings).await;
        scripting_usable(&capabilities, features.token_lock_without_scripting)?;
        if let Some(wait) = replica_wait {
            replica_wait_usable(&conn, &capabilities, wait, limit).await?;
        }
        tracing::debug!(capabilities = %capabilities.summary(), "redlatch: connected");
        let runtime = tokio::runtime::Handle::current();
        let shutdown = CancellationToken::new();
        #[cfg(feature = "holder-records")]
        let last_word = Detached::new(subscriptions.clone());
        let wakeups = Wakeups::start(subscriptions, settings.clone(), &runtime, shutdown.clone());
        let protect = capabilities.no_evict.is_available();
        let watchdog = Watchdog::start(conn.clone(), settings.clone(), &runtime, shutdown.clone());
        if features.watch_holds {
            watchdog.set_loss_watch(LossWatch::start(
                watch_source,
                protect,
                watchdog.holds_for_watch(),
                settings.clone(),
                &runtime,
                shutdown.clone(),
            ));
        }
        let id = Uuid::new_v4();
        // What `anonymous_owner` writes before the number.
        let owner_prefix = OwnerPrefix::of(id);
        watchdog.set_owner_prefix(owner_prefix.clone());
        #[cfg(feature = "holder-records")]
        if features.holder_identity {
            let prefix = settings.read().key_prefix.clone();
            watchdog.set_identity(IdentityPublisher::start(
                conn.clone(),
                last_word,
                record_key(&prefix, &id.to_string()),
                features.holder_purpose.clone(),
                settings.clone(),
                owner_prefix.clone(),
                &runtime,
                shutdown.clone(),
            ));
        }
        Ok(Core {
            id,
            conn,
            capabilities,
            replica_wait,
            settings,
            wakeups,
            watchdog,
            background: Spawner::counted(&runtime),
            owner_seq: AtomicU64::new(0),
            owner_prefix,
            deadlock_detection: features.deadlock_detection,
            shutdown,
        })
    }
}

/// Asks the server what it offers (each question bounded by `limit`; one
/// unanswered counts as absent) and loads the function library if wanted.
async fn learn_capabilities(
    conn: &Connection,
    features: &Features,
    library: FunctionLibrary,
    limit: Duration,
    settings: &SharedSettings,
) -> Capabilities {
    let mut conn = conn.clone();
    let key_prefix = settings.read().key_prefix.clone();
    let server = tokio::time::timeout(limit, capabilities::server_version(&mut conn))
        .await
        .ok()
        .flatten();
    let has_functions = server.as_ref().is_none_or(|server| server.version.0 >= 7);
    let functions = if features.script_functions {
        tokio::time::timeout(limit, library::install(&mut conn, library, has_functions))
            .await
            .unwrap_or(Support::Absent)
    } else {
        Support::Off
    };
    let wait_aof = tokio::time::timeout(limit, capabilities::wait_aof(&mut conn, server.as_ref()))
        .await
        .unwrap_or(Support::Absent);
    // How soon an idle connection needs a PING before a call (`transport/idle.rs`).
    let idle_timeout = tokio::time::timeout(limit, idle::server_timeout(&mut conn))
        .await
        .ok()
        .flatten();
    conn.server_idle_timeout(idle_timeout);
    let no_evict = if !features.no_evict {
        Support::Off
    } else if conn.is_cluster() {
        Support::Absent
    } else {
        let support = tokio::time::timeout(limit, no_evict::protect(&mut conn))
            .await
            .unwrap_or(Support::Absent);
        if support.is_available() {
            conn.keep_unevictable();
        }
        support
    };
    let scripting = tokio::time::timeout(
        limit,
        // The smallest script: the probe asks only whether Lua runs at all.
        capabilities::scripting(&mut conn, &functions, "return 1"),
    )
    .await
    .unwrap_or_else(|_| Support::Denied("no answer to SCRIPT LOAD in time".to_owned()));
    let commands = tokio::time::timeout(
        limit,
        capabilities::script_free_commands(&mut conn, server.as_ref()),
    )
    .await
    .unwrap_or_else(|_| capabilities::ScriptFreeCommands::absent());
    // A key the client's ACL lets it write (`~app:*`, `~redlatch_*`), never created.
    let probe_key = format!("{key_prefix}redlatch_probe");
    let set_ifeq = tokio::time::timeout(
        limit,
        capabilities::set_ifeq(&mut conn, server.as_ref(), &probe_key),
    )
    .await
    .unwrap_or(Support::Absent);
    Capabilities {
        server,
        functions,
        wait_aof,
        no_evict,
        set_ifeq,
        delifeq: commands.delifeq,
        delex_ifeq: commands.delex_ifeq,
        hash_field_expiry: commands.hash_field_expiry,
        scripting,
    }
}

/// Every lock of a client runs as a script but the token lock: a server
/// with no scripting engine (Valkey 9.1 without its Lua module) is refused
/// now, naming what it lacks, rather than at the first call; unless the
/// client asked for the token lock alone there (`token_lock`,
/// `ClientBuilder::token_lock_without_scripting`) and the server serves it
/// without scripts (`SET … IFEQ`, and `DELIFEQ` or `DELEX … IFEQ`).
fn scripting_usable(capabilities: &Capabilities, token_lock: bool) -> Result<()> {
    if capabilities.scripting != Support::Absent {
        return Ok(());
    }
    let token_lock_served = token_lock
        && capabilities.set_ifeq.is_available()
        && (capabilities.delifeq.is_available() || capabilities.delex_ifeq.is_available());
    if token_lock_served {
        tracing::warn!(
            "redlatch: the server runs no scripts; only the token lock (Client::token_lock) works on it"
        );
        return Ok(());
    }
    Err(Error::ServerLacks {
        server: capabilities
            .server
            .as_ref()
            .map_or_else(|| "the server".to_owned(), ToString::to_string),
        missing: "scripting",
        detail: "it runs no Lua (SCRIPT LOAD and FUNCTION LOAD answer that no scripting \
                 engine is found), and redlatch's locks run as Lua scripts: load the \
                 server's Lua module, or use a build that has Lua"
            .to_owned(),
    })
}

/// A client that waits for replicas needs WAIT, and one that waits for
/// fsync WAITAOF and an append-only master: checked now, not at the first
/// acquisition (`WAIT 0 1` and `WAITAOF 1 0 1`, with nothing to wait for,
/// answer at once).
async fn replica_wait_usable(
    conn: &Connection,
    capabilities: &Capabilities,
    wait: ReplicaWait,
    limit: Duration,
) -> Result<()> {
    let (what, command) = if wait.fsync {
        if let Support::Absent = capabilities.wait_aof {
            return Err(Error::InvalidConfig(
                "wait_for_fsync needs WAITAOF (Redis or Valkey 7.2 and later), which this server lacks"
                    .to_owned(),
            ));
        }
        let mut command = redis::cmd("WAITAOF");
        command.arg(1).arg(0).arg(1);
        ("wait_for_fsync", command)
    } else {
        let mut command = redis::cmd("WAIT");
        command.arg(0).arg(1);
        ("wait_for_replicas", command)
    };
    let mut conn = conn.clone();
    let probe = command.query_async::<redis::Value>(&mut conn);
    match tokio::time::timeout(limit, probe).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(Error::InvalidConfig(format!(
            "{what}: the server refused {}: {error}",
            if wait.fsync { "WAITAOF" } else { "WAIT" }
        ))),
        Err(_) => Err(Error::ResponseTimeout {
            op: "connect",
            limit: crate::error::TimeLimit::Response,
        }),
    }
}

impl Core {
    pub(crate) fn current_settings(&self) -> Arc<Settings> {
        self.settings.read().clone()
    }

    /// What every anonymous owner of this client starts with.
    pub(crate) fn owner_prefix(&self) -> &OwnerPrefix {
        &self.owner_prefix
    }

    /// A fresh owner name, unique within this client:
    /// `<client-id>:#<n>@<task>` (`@t<k>` outside a task), the tail naming
    /// the caller's deadlock party (`crate::deadlock::party_of`).
    pub(crate) fn anonymous_owner(&self) -> Arc<str> {
        use std::io::Write;
        let seq = self.owner_seq.fetch_add(1, Ordering::Relaxed);
        let tail = Tail::of(crate::deadlock::anonymous_suffix());
        // Written on the stack, so the name costs one allocation (the Arc),
        // not two: an acquire makes one, on the hot path. A uuid (36), `:#`,
        // a u64 (20 digits at most) and a tail (`@t` and 19 digits) fit in
        // 96 bytes.
        let mut buf = [0u8; 96];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let _ = write!(cursor, "{}:#{seq}{tail}", self.id);
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        match std::str::from_utf8(&buf[..len]) {
            Ok(owner) if len < buf.len() => Arc::from(owner),
            _ => Arc::from(format!("{}:#{seq}{tail}", self.id)),
        }
    }

    /// The owner field for a caller-named owner.
    pub(crate) fn named_owner(&self, owner: &str) -> Arc<str> {
        Arc::from(format!("{}:{owner}", self.id))
    }
}

impl ApplySettings for Core {
    fn apply_settings(&self, settings: Settings) -> Result<()> {
        settings.validate()?;
        let lease_changed = {
            let mut current = self.settings.write();
            let changed = current.default_lease != settings.default_lease;
            *current = Arc::new(settings);
            changed
        };
        if lease_changed {
            self.watchdog.renew_all_soon();
        }
        Ok(())
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // The last handle is gone (guards hold one too): stop the background tasks.
        self.shutdown.cancel();
    }
}

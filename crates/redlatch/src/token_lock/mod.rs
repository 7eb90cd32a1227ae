//! The token lock: the seeds' `SET key token NX PX lease` lock, with an
//! owner token, done with the engine's wait loop, watchdog, loss watch and
//! undo policy. Non-reentrant. Where the server allows, no script runs: the
//! release is `DELIFEQ` (Valkey 9.0+) or `DELEX … IFEQ` (Redis 8.4+), the
//! renewal `SET … IFEQ … PX` (Valkey 8.1+, Redis 8.4+); elsewhere a small
//! script does each. Fencing, where asked, takes one script per acquire.
//!
//! Its files: `calls.rs` (what is sent to Redis, and how the watchdog
//! renews), `request.rs` (what one acquire asks for), `attempt.rs` (the
//! engine's plug-ins: one attempt, the waiting), `guard.rs` (the hold).

pub(crate) mod attempt;
pub(crate) mod calls;
pub(crate) mod guard;
pub(crate) mod request;
pub(crate) mod scripts;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::base::keys::LockKeys;
use crate::base::status::{KeyKind, LockStatus};
use crate::engine::acquire::{Terms, acquire_measured};
use crate::engine::by_name::{ClientState, Primitive};
use crate::engine::context::Core;
use crate::engine::wait::{Wait, wait_for};
use crate::error::{Error, Result};
use crate::token_lock::attempt::Waiting;
use crate::token_lock::calls::{ReleaseBy, Route};
use crate::token_lock::request::TokenAttempt;
use tracing::Instrument;

pub use guard::TokenGuard;

/// What the server lacks for a token lock's call.
fn lacks(core: &Core, missing: &'static str, detail: &str) -> Error {
    Error::ServerLacks {
        server: core
            .capabilities
            .server
            .as_ref()
            .map_or_else(|| "the server".to_owned(), ToString::to_string),
        missing,
        detail: detail.to_owned(),
    }
}

/// A non-reentrant lock whose key is a plain string holding its holder's
/// token: the `SET key token NX PX lease` lock, with the same waiting,
/// watchdog, loss signal and cancel safety as [`Lock`](crate::Lock), and
/// no script on the servers that allow it.
///
/// | step | Valkey 9.0+ | Redis 8.4+ | older servers (Redis 7, Valkey 8.0) |
/// |---|---|---|---|
/// | acquire | `SET key token NX PX lease GET` | the same | the same |
/// | release | `DELIFEQ key token` | `DELEX key IFEQ token` | a compare-and-delete script |
/// | renewal (watchdog) | `SET key token IFEQ token PX lease` | the same | a compare-and-`PEXPIRE` script (Valkey 8.1 has `SET … IFEQ`) |
/// | fenced acquire ([`fenced`](TokenLock::fenced)) | a script | a script | a script |
///
/// So an uncontended cycle costs the server two plain commands. A release
/// publishes nothing: waiters of other clients learn of it from the loss
/// watch's connection, which tracks the key they wait for (`CLIENT
/// TRACKING`: the server tells of the key's next change), and waiters of
/// the releasing client from the release itself. Where the loss watch is
/// off (a [lean](crate::ClientBuilder::lean) client, a cluster, a server
/// that refuses tracking), waiters look again after a back-off growing from
/// 2 ms to 100 ms (docs/SAFETY.md, "Token lock").
///
/// It shares the key name (`PREFIX + NAME`) with [`Lock`](crate::Lock), so
/// the two exclude each other by failing: each finds the other's key of
/// the wrong type ([`Error::WrongType`]). A string key written by the
/// seeds' recipe (or rslock) under the same name is a holder like any
/// other.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> redlatch::Result<()> {
/// # let server = testkit::RedisServer::start().unwrap();
/// # let client = redlatch::Client::connect(&server.url()).await?;
/// let lock = client.token_lock("invoice:42");
/// let guard = lock.acquire().await?; // renewed by the watchdog while held
/// assert!(lock.try_acquire().await?.is_none()); // non-reentrant: held is held
/// guard.release().await?; // Err(NotHeld) if it was lost meanwhile
///
/// let fenced = client.token_lock("invoice:42").fenced();
/// let first = fenced.acquire().await?;
/// let token = first.fencing_token().expect("fenced");
/// first.release().await?;
/// assert!(fenced.acquire().await?.fencing_token() > Some(token));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TokenLock {
    core: Arc<Core>,
    name: Arc<str>,
    /// A fixed lease; `None`: the client's default lease, renewed.
    lease: Option<Duration>,
    fenced: bool,
}

impl Primitive for TokenLock {
    fn from_client(state: ClientState, name: String) -> TokenLock {
        TokenLock::new(state.core, name)
    }
}

impl TokenLock {
    pub(crate) fn new(core: Arc<Core>, name: String) -> TokenLock {
        TokenLock {
            core,
            name: Arc::from(name),
            lease: None,
            fenced: false,
        }
    }

    /// The lock's name, without the key prefix.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same lock, with holds on a fixed `lease` that the watchdog does
    /// not renew: Redis frees the lock after `lease` even if the guard is
    /// still alive, and the guard's `lost()` resolves then. Checked when
    /// the lock is used: [`Error::InvalidDuration`] unless 1 ms ≤ `lease` ≤
    /// 30 days.
    pub fn with_lease(mut self, lease: Duration) -> TokenLock {
        self.lease = Some(lease);
        self
    }

    /// The same lock, whose guards carry a fencing token
    /// ([`TokenGuard::fencing_token`]): taken in the acquire's own script
    /// from the counter the reentrant lock uses (one per server, per hash
    /// slot on a cluster), so tokens grow in the order the acquisitions
    /// took effect. The acquire then runs one script; release and renewal
    /// stay as they are. Needs scripting ([`Error::ServerLacks`] without).
    pub fn fenced(mut self) -> TokenLock {
        self.fenced = true;
        self
    }

    /// Waits as the client's `wait_timeout` says (until held, by default),
    /// then returns the guard.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::InvalidDuration`],
    /// [`Error::WrongType`] (the key holds a hash, a list...; a fenced
    /// lock's counter that is no counter), [`Error::ServerLacks`] (a
    /// renewed or fenced hold where the server can neither renew nor run
    /// scripts), [`Error::Unavailable`], [`Error::ResponseTimeout`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing held: an attempt in flight runs
    /// to its end in the background and gives back a hold it took.
    pub fn acquire(&self) -> impl Future<Output = Result<TokenGuard>> + Send + '_ {
        self.acquire_within(self.core.current_settings().wait_timeout)
    }

    /// True when this client's server releases and renews token locks
    /// without any script (`DELIFEQ` or `DELEX … IFEQ`, and `SET … IFEQ`,
    /// as [`Client::capabilities`](crate::Client::capabilities) reports
    /// them; on a cluster the release runs its script).
    pub fn is_script_free(&self) -> bool {
        Route::for_client(&self.core).script_free()
    }

    /// A snapshot of the lock: whether it is held, the token its key holds
    /// (in [`LockStatus::holders`], count 1, with the holder's identity
    /// where its client publishes one), the remaining lease. A string
    /// written under the name by another library's `SET key token NX PX
    /// lease` reads the same. `waiting_clients` counts only subscribers of
    /// the lock's channel: a token lock's waiters subscribe to none.
    ///
    /// Two round trips, as [`Lock::status`](crate::Lock::status): one
    /// script, then PUBSUB NUMSUB. Reads `PREFIX+NAME` and its fencing
    /// counter; writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// let lock = client.token_lock("invoice:7");
    /// assert!(!lock.status().await?.held);
    /// let guard = lock.acquire().await?;
    /// let status = lock.status().await?;
    /// assert!(status.held);
    /// assert_eq!(status.holders[0].owner, guard.owner_token());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the key is no string:
    /// a reentrant, fair or read-write lock's hash, or other data),
    /// connection errors.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    pub async fn status(&self) -> Result<LockStatus> {
        let (status, kind) = crate::base::status::read_with_kind(&self.core, &self.name).await?;
        if kind == KeyKind::Hash {
            return Err(Error::WrongType { key: status.key });
        }
        Ok(status)
    }

    /// Deletes the lock whatever token its key holds. Returns whether a
    /// lock was deleted. This client's guard on it is marked lost at once
    /// ([`LostReason::ForceUnlocked`](crate::LostReason::ForceUnlocked));
    /// other clients' guards learn of it from their loss watch (the key is
    /// tracked) or their next renewal, and waiters from their next look.
    ///
    /// One round trip, one script (`TYPE`, `GET`, `DEL` of `PREFIX+NAME`,
    /// atomically: a key of another type is left alone).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> redlatch::Result<()> {
    /// # let server = testkit::RedisServer::start().unwrap();
    /// # let client = redlatch::Client::connect(&server.url()).await?;
    /// let lock = client.token_lock("invoice:8");
    /// let guard = lock.acquire().await?;
    /// assert!(lock.force_unlock().await?); // deleted
    /// assert!(!guard.is_held());
    /// assert!(!lock.force_unlock().await?); // nothing left to delete
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the key is no string;
    /// left alone), [`Error::OutcomeUnknown`] (sent, no reply: the lock may
    /// or may not have been deleted), other connection errors (not deleted).
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have deleted the lock.
    pub async fn force_unlock(&self) -> Result<bool> {
        let core = &self.core;
        let settings = core.current_settings();
        let keys = LockKeys::of_name(&settings.key_prefix, &self.name)?
            .per_name_counter(settings.per_name_token_counters)
            .checked_for(&core.conn)?;
        // Before sending: the loss watch may read the key gone before the
        // reply comes, and must know whose doing it was.
        let _unlocking = core.watchdog.force_unlocking(&keys.key);
        let mut conn = core.conn.clone();
        let mut call = crate::base::scripts::FORCE_UNLOCK.call(&conn);
        call.key(&keys.key)
            .later_key(keys.token_name())
            .arg(keys.channel())
            .arg(conn.publish_command())
            .arg("string");
        let (reply, token): (i64, redis::Value) = call
            .run(&mut conn, "force unlock", settings.response_timeout)
            .instrument(tracing::debug_span!("redlatch.force_unlock", lock = %keys.key))
            .await
            .map_err(|error| error.unknown_outcome("force unlock"))?;
        match (reply, token) {
            (1, redis::Value::BulkString(token)) => {
                // Only the hold whose token was deleted: this client's
                // next hold of the key has another.
                if let Ok(token) = std::str::from_utf8(&token) {
                    core.watchdog.mark_owner_lost(&keys.key, token);
                }
                Ok(true)
            }
            (0, _) => Ok(false),
            (-1, _) => Err(Error::WrongType {
                key: keys.key.to_string(),
            }),
            (other, _) => Err(Error::Protocol {
                op: "force unlock",
                detail: other.to_string(),
            }),
        }
    }

    fn timeout(&self, waited: Duration) -> Error {
        Error::Timeout {
            name: self.name.to_string(),
            waited,
        }
    }

    async fn acquire_waiting(&self, wait: Wait) -> Result<Option<TokenGuard>> {
        let core = &self.core;
        let settings = core.current_settings();
        let keys = Arc::new(
            LockKeys::of_name(&settings.key_prefix, &self.name)?
                .per_name_counter(settings.per_name_token_counters)
                .checked_for(&core.conn)?,
        );
        let terms = Terms::choose(core, None, self.lease)?;
        let route = Route::for_client(core);
        if route.release == ReleaseBy::Nothing {
            return Err(lacks(
                core,
                "DELIFEQ, DELEX IFEQ or scripting",
                "a token lock's release deletes its key only while it holds the owner's token",
            ));
        }
        if terms.renewed && route.renewal.is_none() {
            return Err(lacks(
                core,
                "SET IFEQ or scripting",
                "the watchdog renews a token lock's lease only while the key holds the owner's \
                 token: use a fixed lease (with_lease)",
            ));
        }
        if self.fenced && !route.scripting {
            return Err(lacks(
                core,
                "scripting",
                "a fenced token lock takes its fencing token in the acquire's script",
            ));
        }
        let mut waiting = Waiting {
            core: core.clone(),
            call: TokenAttempt {
                keys,
                token: terms.owner.clone(),
                lease_ms: terms.lease_ms,
                fenced: self.fenced,
                release_by: route.release,
            },
            terms,
            route,
            nudge: None,
            polls: 0,
            idle_wakes: 0,
            last_look: None,
        };
        let span = tracing::debug_span!("redlatch.acquire", lock = %self.name, token = tracing::field::Empty);
        acquire_measured(span, wait_for(&mut waiting, wait)).await
    }
}

crate::base::handle_options::waiting_methods!(
    TokenLock => TokenGuard,
    "[`Error::Timeout`](crate::Error::Timeout)",
    "One attempt: the guard, or `None` when another owner holds it. One round trip.",
    "Waits as `wait` says for the lock, then holds it."
);

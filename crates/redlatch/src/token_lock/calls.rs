//! The token lock's calls to Redis, typed: the acquire (`SET NX PX GET`, or
//! the fenced script), the release (`DELIFEQ`, `DELEX … IFEQ`, or the
//! compare-and-delete script), the look a waiter takes at the key it waits
//! for (`PTTL`, tracked on the loss watch's connection), and how the
//! watchdog renews a hold (`SET … IFEQ … PX`, or the compare-and-PEXPIRE
//! script).

use std::sync::Arc;
use std::time::Duration;

use crate::base::keys::LockKeys;
use crate::engine::context::Core;
use crate::engine::hold_kind::BatchRenewal;
use crate::engine::wakeup::Nudge;
use crate::error::{Error, Result};
use crate::lease_clock::LeaseInstant;
use crate::scripts::Invocation;
use crate::transport::capabilities::Capabilities;
use crate::transport::{Connection, bounded};

/// How this client's token locks are released and renewed on its server:
/// the plain commands where the server has them, the scripts elsewhere.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) release: ReleaseBy,
    /// How the watchdog renews a hold; `None`: it cannot (neither
    /// `SET … IFEQ` nor scripting), so only a fixed lease is offered.
    pub(crate) renewal: Option<&'static BatchRenewal>,
    /// The fenced acquire's script can run.
    pub(crate) scripting: bool,
}

/// How a hold is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseBy {
    /// `DELIFEQ key token` (Valkey 9.0+).
    Delifeq,
    /// `DELEX key IFEQ token` (Redis 8.4+).
    DelexIfeq,
    /// `token_release.lua`.
    Script,
    /// Nothing can: the server has none of the above.
    Nothing,
}

impl Route {
    /// The route the server's commands allow. On a cluster (`cluster`) the
    /// release is the script where scripts run: a command redis-rs sends
    /// again after a dropped connection runs twice there, and a second
    /// `DELIFEQ` would answer "not held" for a release that took effect; the
    /// script runs re-send-safe (its request record). The acquire (`SET NX
    /// GET` knows its own token again) and the renewal (`SET … IFEQ`, twice
    /// the same) run twice harmlessly.
    pub(crate) fn of(commands: &Capabilities, cluster: bool) -> Route {
        let scripting = commands.scripting.is_available();
        let release = if cluster && scripting {
            ReleaseBy::Script
        } else if commands.delifeq.is_available() {
            ReleaseBy::Delifeq
        } else if commands.delex_ifeq.is_available() {
            ReleaseBy::DelexIfeq
        } else if scripting {
            ReleaseBy::Script
        } else {
            ReleaseBy::Nothing
        };
        let renewal = if commands.set_ifeq.is_available() {
            Some(&NATIVE_RENEWAL)
        } else if scripting {
            Some(&SCRIPT_RENEWAL)
        } else {
            None
        };
        Route {
            release,
            renewal,
            scripting,
        }
    }

    /// The route of `core`'s server (as it answered at connect).
    pub(crate) fn for_client(core: &Core) -> Route {
        Route::of(&core.capabilities, core.conn.is_cluster())
    }

    /// True when every step runs without a script (the fenced acquire aside).
    pub(crate) fn script_free(&self) -> bool {
        matches!(self.release, ReleaseBy::Delifeq | ReleaseBy::DelexIfeq)
            && self.renewal.is_some_and(|renewal| renewal.native.is_some())
    }
}

/// Renews holds with `SET key token IFEQ token PX lease` (Valkey 8.1+,
/// Redis 8.4+): a missing key is not created, a key holding another token
/// is left alone (nil: gone).
pub(crate) static NATIVE_RENEWAL: BatchRenewal = BatchRenewal {
    name: "token_lock",
    script: &crate::token_lock::scripts::TOKEN_RENEW,
    add_hold: add_to_script,
    is_lock: true,
    native: Some(|pipeline, key, owner, lease_ms| {
        pipeline
            .cmd("SET")
            .arg(key)
            .arg(owner)
            .arg("IFEQ")
            .arg(owner)
            .arg("PX")
            .arg(lease_ms);
    }),
    string_value: true,
    keeps_lease: true,
};

/// Renews holds with `token_renew.lua` (compare-and-PEXPIRE).
pub(crate) static SCRIPT_RENEWAL: BatchRenewal = BatchRenewal {
    name: "token_lock_script",
    script: &crate::token_lock::scripts::TOKEN_RENEW,
    add_hold: add_to_script,
    is_lock: true,
    native: None,
    string_value: true,
    keeps_lease: true,
};

fn add_to_script(invocation: &mut Invocation, key: &str, owner: &str, lease_ms: u64) {
    invocation.key(key).arg(owner).arg(lease_ms);
}

/// What one acquire attempt found.
#[derive(Debug)]
pub(crate) enum Attempted {
    /// Taken: the lock's key now holds this owner's token. `fence`: the
    /// fencing token of a fenced acquire.
    Acquired {
        fence: Option<u64>,
        sent_at: LeaseInstant,
    },
    /// Another token holds it: `holder`, a digest of that token where the
    /// reply named it (not the fenced acquire's script), tells a waiter
    /// whether the key changed hands since its last look.
    Held { holder: Option<u64> },
}

/// A short digest of a holder's token: equal tokens, equal digests.
fn digest(token: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(token)
}

/// One acquire: `SET key token NX PX lease GET`, or the fenced script.
/// One round trip.
///
/// `GET` makes the reply say who holds it, and that the key is a string:
/// a hash (a reentrant lock of the same name) answers `WRONGTYPE`. A reply
/// naming this very token is an acquire sent again (a cluster re-send)
/// whose first run took the lock: acquired.
pub(crate) async fn acquire(
    conn: &mut Connection,
    keys: &LockKeys,
    token: &str,
    lease_ms: u64,
    fenced: bool,
    sent_at: LeaseInstant,
    limit: Duration,
) -> Result<Attempted> {
    if fenced {
        let mut call = crate::token_lock::scripts::TOKEN_ACQUIRE_FENCED.call(conn);
        call.key(&keys.key)
            .later_key(keys.token())
            .arg(token)
            .arg(lease_ms);
        let (code, value): (i64, i64) = call.run(conn, "acquire", limit).await?;
        return match code {
            1 => Ok(Attempted::Acquired {
                fence: u64::try_from(value).ok(),
                sent_at,
            }),
            0 => Ok(Attempted::Held { holder: None }),
            _ => Err(Error::WrongType {
                key: keys.key.to_string(),
            }),
        };
    }
    let call = async {
        redis::cmd("SET")
            .arg(&*keys.key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms)
            .arg("GET")
            .query_async::<Option<Vec<u8>>>(conn)
            .await
            .map_err(|error| Error::from_redis("acquire", error))
    };
    match bounded("acquire", limit, call).await {
        Ok(None) => Ok(Attempted::Acquired {
            fence: None,
            sent_at,
        }),
        Ok(Some(holder)) if holder == token.as_bytes() => Ok(Attempted::Acquired {
            fence: None,
            sent_at,
        }),
        Ok(Some(holder)) => Ok(Attempted::Held {
            holder: Some(digest(&holder)),
        }),
        Err(Error::WrongType { .. }) => Err(Error::WrongType {
            key: keys.key.to_string(),
        }),
        Err(error) if refused_for_memory(&error) => {
            holder_under_oom(conn, keys, token, sent_at, limit, error).await
        }
        Err(error) => Err(error),
    }
}

/// True when the server refused a write for memory (`maxmemory` reached
/// under `noeviction`).
fn refused_for_memory(error: &Error) -> bool {
    matches!(error, Error::Redis { source, .. } if source.code() == Some("OOM"))
}

/// An acquire the server refused for memory: `SET … NX` is refused past
/// `maxmemory` even when the key is there and nothing would be written.
/// Reads run, so the key's holder is read (`GET`): another token's hold
/// answers busy, this very token's (a re-send whose first run took it)
/// acquired; a free lock (or a key gone meanwhile) keeps the OOM error.
async fn holder_under_oom(
    conn: &mut Connection,
    keys: &LockKeys,
    token: &str,
    sent_at: LeaseInstant,
    limit: Duration,
    refused: Error,
) -> Result<Attempted> {
    let call = async {
        redis::cmd("GET")
            .arg(&*keys.key)
            .query_async::<Option<Vec<u8>>>(conn)
            .await
            .map_err(|error| Error::from_redis("acquire", error))
    };
    match bounded("acquire", limit, call).await {
        Ok(Some(holder)) if holder == token.as_bytes() => Ok(Attempted::Acquired {
            fence: None,
            sent_at,
        }),
        Ok(Some(holder)) => Ok(Attempted::Held {
            holder: Some(digest(&holder)),
        }),
        Ok(None) => Err(refused),
        Err(Error::WrongType { .. }) => Err(Error::WrongType {
            key: keys.key.to_string(),
        }),
        Err(error) => Err(error),
    }
}

/// Gives one hold back: deletes the key if it still holds `token`. True
/// when it did; false when the key was gone or held another token. One
/// round trip.
///
/// # Errors
/// [`Error::WrongType`] when the key is no string; [`Error::ServerLacks`]
/// when the server can neither compare-and-delete nor run a script.
pub(crate) async fn release(
    conn: &mut Connection,
    key: &str,
    token: &str,
    by: ReleaseBy,
    limit: Duration,
) -> Result<bool> {
    let deleted: i64 = match by {
        ReleaseBy::Delifeq | ReleaseBy::DelexIfeq => {
            let mut command = match by {
                ReleaseBy::Delifeq => redis::cmd("DELIFEQ"),
                _ => redis::cmd("DELEX"),
            };
            command.arg(key);
            if by == ReleaseBy::DelexIfeq {
                command.arg("IFEQ");
            }
            command.arg(token);
            let call = async {
                command
                    .query_async::<i64>(conn)
                    .await
                    .map_err(|error| Error::from_redis("release", error))
            };
            bounded("release", limit, call).await?
        }
        ReleaseBy::Script => {
            let mut call = crate::token_lock::scripts::TOKEN_RELEASE.call(conn);
            call.key(key).arg(token);
            call.run(conn, "release", limit).await?
        }
        ReleaseBy::Nothing => {
            return Err(Error::ServerLacks {
                server: "the server".to_owned(),
                missing: "DELIFEQ, DELEX IFEQ or scripting",
                detail: "a token lock's release needs one of them".to_owned(),
            });
        }
    };
    match deleted {
        1 => Ok(true),
        0 => Ok(false),
        _ => Err(Error::WrongType {
            key: key.to_owned(),
        }),
    }
}

/// What a waiter's look at the key it waits for found.
pub(crate) struct Look {
    /// The key's remaining lease in ms (-2: gone, -1: no expiry).
    pub(crate) pttl_ms: i64,
    /// The key is tracked on the loss watch's connection: its next change
    /// (the release, an expiry, a renewal, a delete) wakes the waiter.
    pub(crate) tracked: bool,
}

/// Looks at `key` for a waiter whose channel `nudge` wakes: registers the
/// nudge with the loss watch, then reads the key's `PTTL` through the
/// watch's connection after `CLIENT CACHING yes`, which tracks it (on a
/// cluster, the watch's connection to the slot's master). `None` when no
/// watch connection can track it (no watch on this client, a server that
/// refuses tracking, a reconnection under way, a slot half-way through a
/// migration): the waiter polls instead. One round trip.
pub(crate) async fn look(
    core: &Core,
    key: &Arc<str>,
    nudge: &Nudge,
    limit: Duration,
) -> Option<Look> {
    let watch = core.watchdog.loss_watch()?;
    let Some(mut conn) = watch.route().connection() else {
        let pttl_ms = tokio::time::timeout(limit, watch.look_on_cluster(key, nudge))
            .await
            .ok()??;
        return Some(Look {
            pttl_ms,
            tracked: true,
        });
    };
    watch.wake_on_change(key, nudge.clone());
    let mut pipeline = redis::pipe();
    pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
    pipeline.cmd("PTTL").arg(&**key);
    let read = pipeline.query_async::<(i64,)>(&mut conn);
    match tokio::time::timeout(limit, read).await {
        Ok(Ok((pttl_ms,))) => Some(Look {
            pttl_ms,
            tracked: true,
        }),
        // Not tracked after all: the registered nudge wakes the waiter at
        // the next change anyway (or is dropped with the channel).
        _ => None,
    }
}

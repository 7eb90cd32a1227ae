//! Renewals of watched holds through the loss watch's own connection, so
//! that our own renewals cost the watch nothing.
//!
//! A renewal changes its lock's key (PEXPIRE). Sent on the command
//! connection, every renewal made the server push an invalidation to the
//! watch and the watch read the key back (HEXISTS), per hold per renewal:
//! with 10,000 locks renewed a second, Redis's CPU share went from 0.05
//! without the watch to 0.18 with it (docs/BENCHMARKS.md, issue 36).
//!
//! The watch's connection tracks in `OPTIN NOLOOP` mode
//! (`engine/loss_watch.rs`), and a renewal batch goes through it as one
//! transaction: `MULTI`, the renewal script, `CLIENT CACHING yes`,
//! `EXISTS` of the batch's keys, `EXEC`. NOLOOP: the server sends this
//! connection no invalidation for its own writes; but a write still drops
//! the key from the server's tracking table, so the `EXISTS` after it
//! tracks the keys again, in the same transaction, where no other client's
//! change can fall between. The script itself tracks nothing (OPTIN, no
//! `CACHING yes` before it): on Redis before 7.2 every read inside a script
//! would track all of the script's keys, a batch of 100 costing 40,000
//! tracking-table inserts. So a renewal leaves each key tracked, and any
//! later change by anyone else is pushed at once, as before; it costs the
//! server one `EXISTS` per batch and the watch nothing.
//!
//! Through Sentinel the transaction starts with `ROLE`: a server that is
//! no longer the master renews nothing here. Whenever this route cannot
//! answer (no watch connection now, a transaction refused, a broken
//! connection, a demoted master), the batch is sent on the command
//! connection, as it is where the watch is off; so is one that finds the
//! script or the function library missing, loaded again there. The watch
//! opens this route only where the server allows `MULTI`, and closes it
//! for good once it sees the tracking table full (NOLOOP would hide that
//! table's evictions: `engine/loss_watch.rs`).
//!
//! The transaction is a plain pipeline, `MULTI` and `EXEC` among its
//! commands, whose replies are read here (`MULTI`'s, `EXEC`'s array or
//! error), not redis-rs's `Pipeline::atomic`: that one panics in the
//! connection's task when the server refuses `MULTI`. A refused `MULTI`
//! or `EXEC` (an ACL changed since the watch asked; a refused `EXEC`
//! leaves the connection inside the transaction) closes the route as a
//! broken connection does: the watch opens a new one and asks again.
//!
//! The route gets half of the batch's time, so that the command connection
//! has the other half. A route that does not answer at all (a stalled or
//! broken connection: no server reply, not even an error) is closed at once
//! and the watch told to open a new connection: a stalled watch connection
//! hears of no change either, and every renewal after would wait on it
//! again, until the holds' leases ran out (red team, issue 36). A renewal
//! that got no answer there may still run later: it only lengthens a lease
//! its hold still has (renew.lua), and the watchdog counts the lease from
//! before it was sent.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{RedisError, RedisResult, Value};

use crate::scripts::Invocation;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sync::Mutex;
use crate::transport::Connection;

/// The loss watch's connection while it is open, for the renewals.
#[derive(Clone, Default)]
pub(crate) struct WatchRoute {
    open: Arc<Mutex<Option<Route>>>,
}

#[derive(Clone)]
struct Route {
    conn: MultiplexedConnection,
    /// Through Sentinel: every transaction asks `ROLE` first.
    asks_role: bool,
    /// Cancelled when a renewal got no answer here: the watch drops the
    /// connection and opens another.
    broken: CancellationToken,
}

impl WatchRoute {
    /// Renewals go through `conn` until the returned value drops (the
    /// watch's connection failed, or the client shut down).
    /// `broken` (a child of the client's shutdown) is cancelled when a
    /// renewal finds the connection not answering.
    pub(crate) fn open(
        &self,
        conn: &MultiplexedConnection,
        asks_role: bool,
        broken: CancellationToken,
    ) -> OpenRoute {
        *self.open.lock() = Some(Route {
            conn: conn.clone(),
            asks_role,
            broken: broken.clone(),
        });
        OpenRoute {
            route: self.clone(),
            broken,
        }
    }

    /// Runs a renewal batch (`keys`: its keys, in order): through the
    /// watch's connection when it is open and answers within half of
    /// `budget` (the batch's time), else on `conn`.
    pub(crate) async fn renew(
        &self,
        invocation: &Invocation,
        keys: &[Arc<str>],
        conn: &mut Connection,
        budget: Duration,
    ) -> RedisResult<Vec<i64>> {
        // As the client runs its scripts: FCALL, or EVALSHA.
        let script = invocation.command(conn);
        if let Some(mut answers) = self.through_route(vec![script], keys, budget).await {
            match answers.pop().map(|answer| {
                answer.and_then(|value| redis::from_redis_value(value).map_err(Into::into))
            }) {
                Some(Ok(renewed)) => return Ok(renewed),
                // A lost script or library: the command connection's call
                // loads it.
                Some(Err(error)) => {
                    tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: renewal through the loss watch's connection refused; sending it on the command connection");
                }
                None => {}
            }
        }
        invocation.invoke_async(conn).await
    }

    /// Runs a batch of plain renewal commands (`pipeline`, one per hold;
    /// `keys`: their keys, in order) as [`WatchRoute::renew`] runs a
    /// script: through the watch's connection when it is open and answers
    /// within half of `budget`, else on `conn`. Each command's own answer.
    pub(crate) async fn renew_each(
        &self,
        pipeline: redis::Pipeline,
        keys: &[Arc<str>],
        conn: &mut Connection,
        budget: Duration,
    ) -> RedisResult<Vec<RedisResult<Value>>> {
        let commands: Vec<redis::Cmd> = pipeline.cmd_iter().cloned().collect();
        if let Some(answers) = self.through_route(commands, keys, budget).await {
            return Ok(answers);
        }
        let mut pipeline = pipeline;
        pipeline.ignore_errors().query_async(conn).await
    }

    /// Runs `commands` in a renewal transaction on the watch's connection,
    /// if the route is open, within half of `budget`: each command's
    /// answer; `None` when the batch is to go on the command connection.
    /// A connection that cannot carry renewals now is closed (see
    /// [`Failure::Unusable`]).
    async fn through_route(
        &self,
        commands: Vec<redis::Cmd>,
        keys: &[Arc<str>],
        budget: Duration,
    ) -> Option<Vec<RedisResult<Value>>> {
        let mut route = self.open.lock().clone()?;
        let failure =
            match tokio::time::timeout(budget / 2, transaction(&mut route, commands, keys)).await {
                Ok(Ok(answers)) => return Some(answers),
                Ok(Err(failure)) => failure,
                Err(_) => Failure::Unusable(no_reply("any command, in time")),
            };
        match failure {
            Failure::Answered(error) => {
                tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: renewal through the loss watch's connection refused; sending it on the command connection");
            }
            Failure::Unusable(error) => {
                tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: the loss watch's connection cannot carry renewals now; closing it, sending the renewal on the command connection");
                self.close(&route.broken);
            }
        }
        None
    }

    /// The watch's connection while it is open: a waiter of a token lock
    /// tracks the key it waits for through it (`token_lock/`).
    pub(crate) fn connection(&self) -> Option<MultiplexedConnection> {
        self.open.lock().as_ref().map(|route| route.conn.clone())
    }

    /// Closes the route opened with `broken` (not a newer one) and tells
    /// the watch to open a new connection.
    fn close(&self, broken: &CancellationToken) {
        broken.cancel();
        let mut open = self.open.lock();
        if open
            .as_ref()
            .is_some_and(|route| route.broken.is_cancelled())
        {
            open.take();
        }
    }
}

/// The watch's connection, open for renewals while this lives.
pub(crate) struct OpenRoute {
    route: WatchRoute,
    broken: CancellationToken,
}

impl Drop for OpenRoute {
    fn drop(&mut self) {
        // Dropping the clone here lets the connection close with the watch's.
        self.route.close(&self.broken);
    }
}

/// Why a renewal batch did not go through the watch's connection.
enum Failure {
    /// The server refused the batch (a refused command, a server busy
    /// loading): the connection is sound, the route stays open.
    Answered(RedisError),
    /// The connection cannot carry renewals now: no answer (stalled or
    /// broken), a refused `MULTI` or `EXEC` (an ACL changed since the watch
    /// asked: after a refused `EXEC` the server keeps the connection in the
    /// transaction), an answer out of shape, a demoted master. The route is
    /// closed and the watch opens a new connection, asking again whether
    /// the server allows transactions.
    Unusable(RedisError),
}

impl From<RedisError> for Failure {
    fn from(error: RedisError) -> Failure {
        match error.code() {
            Some(_) => Failure::Answered(error),
            None => Failure::Unusable(error),
        }
    }
}

/// One renewal transaction on the watch's connection: `[ROLE]`,
/// `commands` (one script call, or a command per hold), `CLIENT CACHING
/// yes`, `EXISTS` of `keys`; each command's answer. A script or library
/// the server lost is an error in its answer: the command connection's
/// call loads it.
///
/// Sent as a plain pipeline, `MULTI` and `EXEC` included, whose replies
/// are read here: redis-rs's own transactions (`Pipeline::atomic`) panic
/// in its connection's task when the server refuses `MULTI` (redis 1.x,
/// debug builds: `aio/multiplexed_connection.rs`), which kills the watch's
/// connection. Any answer the server gives is an outcome here.
async fn transaction(
    route: &mut Route,
    commands: Vec<redis::Cmd>,
    keys: &[Arc<str>],
) -> Result<Vec<RedisResult<Value>>, Failure> {
    let count = commands.len();
    let mut pipeline = redis::pipe();
    pipeline.cmd("MULTI");
    if route.asks_role {
        pipeline.cmd("ROLE");
    }
    for command in commands {
        pipeline.add_command(command);
    }
    pipeline.cmd("CLIENT").arg("CACHING").arg("yes");
    let exists = pipeline.cmd("EXISTS");
    for key in keys {
        exists.arg(&**key);
    }
    pipeline.cmd("EXEC");
    // Between MULTI and EXEC: ROLE, the commands, CACHING, EXISTS.
    let queued = usize::from(route.asks_role) + count + 2;
    let answers: Vec<RedisResult<Value>> = pipeline
        .ignore_errors()
        .query_async(&mut route.conn)
        .await?;
    if answers.len() != queued + 2 {
        return Err(Failure::Unusable(no_reply("a command")));
    }
    let mut answers = answers.into_iter();
    let (Some(multi), Some(exec)) = (answers.next(), answers.next_back()) else {
        return Err(Failure::Unusable(no_reply("MULTI or EXEC")));
    };
    if let Err(error) = multi {
        // The commands ran outside a transaction (the renewals only
        // lengthened leases their holds still have), or were queued in a
        // transaction left open: either way this connection is done here.
        return Err(Failure::Unusable(refused("MULTI", &error)));
    }
    let exec = match exec {
        Ok(exec @ Value::Array(_)) => exec,
        // A command refused as it was queued (its own answer says why):
        // the server dropped the transaction.
        Err(error) if error.code() == Some("EXECABORT") => {
            let refusal = answers.find_map(Result::err).unwrap_or(error);
            return Err(Failure::Answered(refusal));
        }
        Err(error) => return Err(Failure::Unusable(refused("EXEC", &error))),
        Ok(_) => return Err(Failure::Unusable(no_reply("EXEC"))),
    };
    let mut answers: Vec<RedisResult<Value>> =
        redis::from_redis_value(exec).map_err(|_| Failure::Unusable(no_reply("EXEC")))?;
    if answers.len() != queued {
        return Err(Failure::Unusable(no_reply("a command in EXEC")));
    }
    // CACHING's and EXISTS's answers.
    answers.truncate(queued - 2);
    if route.asks_role {
        let role = answers.remove(0)?;
        if !crate::transport::watch::is_master(&role) {
            return Err(Failure::Unusable(RedisError::from((
                redis::ErrorKind::Client,
                "the loss watch's server is no longer the master",
            ))));
        }
    }
    Ok(answers)
}

/// The server refused `what` (`MULTI` or `EXEC`) in a renewal transaction.
fn refused(what: &'static str, error: &RedisError) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Client,
        "the server refused a renewal transaction",
        format!("{what}: {error}"),
    ))
}

fn no_reply(what: &'static str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Client,
        "no reply in the renewal transaction",
        what.to_owned(),
    ))
}

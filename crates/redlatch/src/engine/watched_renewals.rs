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
        let route = self.open.lock().clone();
        if let Some(mut route) = route {
            // As the client runs its scripts: FCALL, or EVALSHA.
            let script = invocation.command(conn);
            match tokio::time::timeout(budget / 2, transaction(&mut route, script, keys)).await {
                Ok(Ok(renewed)) => return Ok(renewed),
                // The server answered (a lost script, a refused
                // transaction, a demoted master): the connection is sound.
                Ok(Err(error)) if error.code().is_some() => {
                    tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: renewal through the loss watch's connection refused; sending it on the command connection");
                }
                failed => {
                    let error = match failed {
                        Ok(Err(error)) => error.to_string(),
                        _ => "no answer in time".to_owned(),
                    };
                    tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: no answer to a renewal on the loss watch's connection; closing it, sending the renewal on the command connection");
                    self.close(&route.broken);
                }
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
        let route = self.open.lock().clone();
        if let Some(mut route) = route {
            let commands: Vec<redis::Cmd> = pipeline.cmd_iter().cloned().collect();
            match tokio::time::timeout(budget / 2, transaction_each(&mut route, &commands, keys))
                .await
            {
                Ok(Ok(answers)) => return Ok(answers),
                Ok(Err(error)) if error.code().is_some() => {
                    tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: renewal through the loss watch's connection refused; sending it on the command connection");
                }
                failed => {
                    let error = match failed {
                        Ok(Err(error)) => error.to_string(),
                        _ => "no answer in time".to_owned(),
                    };
                    tracing::debug!(target: crate::engine::renewal::LOG_TARGET, %error, "redlatch: no answer to a renewal on the loss watch's connection; closing it, sending the renewal on the command connection");
                    self.close(&route.broken);
                }
            }
        }
        let mut pipeline = pipeline;
        pipeline.ignore_errors().query_async(conn).await
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

/// One renewal transaction on the watch's connection. A script or library
/// the server lost is an error here: the command connection's call loads it.
async fn transaction(
    route: &mut Route,
    script: redis::Cmd,
    keys: &[Arc<str>],
) -> RedisResult<Vec<i64>> {
    let mut pipeline = redis::pipe();
    pipeline.atomic();
    if route.asks_role {
        pipeline.cmd("ROLE");
    }
    pipeline.add_command(script);
    pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
    let exists = pipeline.cmd("EXISTS");
    for key in keys {
        exists.arg(&**key);
    }
    exists.ignore();
    let mut answers: Vec<RedisResult<Value>> = pipeline
        .ignore_errors()
        .query_async(&mut route.conn)
        .await?;
    let renewed = answers
        .pop()
        .unwrap_or_else(|| Err(no_reply("the script")))?;
    if route.asks_role {
        let role = answers.pop().unwrap_or_else(|| Err(no_reply("ROLE")))?;
        if !crate::transport::watch::is_master(&role) {
            return Err(RedisError::from((
                redis::ErrorKind::Client,
                "the loss watch's server is no longer the master",
            )));
        }
    }
    redis::from_redis_value(renewed).map_err(Into::into)
}

/// [`transaction`] for plain commands, one per hold: each one's answer.
async fn transaction_each(
    route: &mut Route,
    commands: &[redis::Cmd],
    keys: &[Arc<str>],
) -> RedisResult<Vec<RedisResult<Value>>> {
    let mut pipeline = redis::pipe();
    pipeline.atomic();
    if route.asks_role {
        pipeline.cmd("ROLE");
    }
    for command in commands {
        pipeline.add_command(command.clone());
    }
    pipeline.cmd("CLIENT").arg("CACHING").arg("yes").ignore();
    let exists = pipeline.cmd("EXISTS");
    for key in keys {
        exists.arg(&**key);
    }
    exists.ignore();
    let mut answers: Vec<RedisResult<Value>> = pipeline
        .ignore_errors()
        .query_async(&mut route.conn)
        .await?;
    if route.asks_role {
        if answers.is_empty() {
            return Err(no_reply("ROLE"));
        }
        let role = answers.remove(0)?;
        if !crate::transport::watch::is_master(&role) {
            return Err(RedisError::from((
                redis::ErrorKind::Client,
                "the loss watch's server is no longer the master",
            )));
        }
    }
    if answers.len() != commands.len() {
        return Err(no_reply("a renewal"));
    }
    Ok(answers)
}

fn no_reply(what: &'static str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Client,
        "no reply in the renewal transaction",
        what.to_owned(),
    ))
}

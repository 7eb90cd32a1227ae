//! The reentrant lock's scripts: acquire (optionally followed by WAIT),
//! release, raise the fencing counter, withdraw a claim to the next turn.

use std::time::Duration;

use crate::lease_clock::LeaseInstant;

use futures_util::future::join_all;
use redis::Value;
use tracing::debug;

use crate::base::keys::LockKeys;
use crate::base::request::Request;
use crate::error::{Error, Result};
use crate::scripts::acquired::{Acquired, unexpected};
use crate::scripts::released::{Released, released};
use crate::transport::topology::ReplicaWait;
use crate::transport::{Connection, bounded};

/// A waiter that has waited this long claims the lock's next turn: a free
/// lock then refuses younger contenders until it comes
/// (`scripts/lib/precedence.lua`). Below it nobody claims, so short waits
/// cost nothing; above it the longest waiter of every process is served
/// before newcomers, whichever process the scheduler runs first.
pub(crate) const PRECEDENCE_AFTER: Duration = Duration::from_millis(250);

/// How long a claim stands without a new attempt of its claimant, which
/// tries again within a third of it, as long as nobody is refused: the
/// first refusal of a free lock cuts it to [`PRECEDENCE_COME`]. One that
/// gave up withdraws its claim at once.
pub(crate) const PRECEDENCE_KEEP: Duration = Duration::from_secs(1);

/// How long a free lock keeps a claimed turn once it has refused someone:
/// the claimant's time to come. A claimant that its client woke first comes
/// in one round trip; one that is not there to take its turn (a future
/// polled rarely, a stopped process) loses the claim after this, so it
/// holds a free lock back this long at most per attempt it made.
pub(crate) const PRECEDENCE_COME: Duration = Duration::from_millis(200);

/// The claim's terms, the acquire script's last arguments: how long a
/// claim stands without a new attempt, and how long a refusing free lock
/// waits for its claimant.
fn claim_terms() -> [u64; 2] {
    [
        PRECEDENCE_KEEP.as_millis() as u64,
        PRECEDENCE_COME.as_millis() as u64,
    ]
}

/// What one acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockReply {
    /// Held now, by this owner.
    Acquired(Acquired),
    /// Another owner holds it for `pttl_ms` more (-1: no expiry), or it is
    /// free and a longer waiter's claim stands `pttl_ms` more. `first`: this
    /// owner's own claim to the next turn stands; it must try again within
    /// [`PRECEDENCE_KEEP`] to keep it.
    Held { pttl_ms: i64, first: bool },
}

/// One acquire request; each send at most `limit`.
pub(crate) async fn acquire(
    conn: &mut Connection,
    request: &Request,
    sent_at: LeaseInstant,
    limit: Duration,
) -> Result<LockReply> {
    let mut call = crate::lock::scripts::ACQUIRE.call(conn);
    call.key(&request.keys.key)
        .later_key(request.keys.token_name())
        .later_key(request.keys.precedence_name())
        .arg(request.lease_ms)
        .arg(&*request.owner)
        .arg(request.waited_ms);
    call.arg(&claim_terms()[..]);
    let reply: Vec<Value> = call.run(conn, "acquire", limit).await?;
    parse_acquire(request, &reply, sent_at)
}

/// Several acquire requests in one call of the acquire script (coalesced
/// concurrent acquires): one outcome per request, in order, each the one a
/// lone call would give (one lock's fault is its own); an error of the
/// server itself is every request's. Each send at most `limit`. Not for a
/// cluster, where one call may only touch one slot.
pub(crate) async fn acquire_many(
    conn: &mut Connection,
    requests: &[Request],
    limit: Duration,
) -> Result<Vec<Result<LockReply>>> {
    let mut call = crate::lock::scripts::ACQUIRE.call(conn);
    for request in requests {
        call.key(&request.keys.key)
            .later_key(request.keys.token_name())
            .later_key(request.keys.precedence_name());
    }
    for request in requests {
        call.arg(request.lease_ms)
            .arg(&*request.owner)
            .arg(request.waited_ms);
    }
    call.arg(&claim_terms()[..]);
    let sent_at = LeaseInstant::now();
    let reply: Vec<Value> = match call.run(conn, "acquire", limit).await {
        Err(error) if requests.len() > 1 && refused_before_running(&error) => {
            // A name this user may not touch: each lock gets a lone call's answer.
            let alone = requests.iter().map(|request| {
                let mut conn = conn.clone();
                async move { acquire(&mut conn, request, LeaseInstant::now(), limit).await }
            });
            return Ok(join_all(alone).await);
        }
        reply => reply?,
    };
    per_request("acquire", requests, &reply, |request, entry| {
        parse_acquire(request, entry, sent_at)
    })
}

/// Several release requests in one call of the release script (coalesced
/// concurrent releases): one outcome per request, in order, each the one a
/// lone call would give. Each send at most `limit`. Not for a cluster,
/// where one call may only touch one slot.
pub(crate) async fn release_many(
    conn: &mut Connection,
    requests: &[Request],
    limit: Duration,
) -> Result<Vec<Result<Released>>> {
    let mut call = crate::lock::scripts::RELEASE.call(conn);
    for request in requests {
        call.key(&request.keys.key);
    }
    for request in requests {
        call.arg(request.keys.channel_name())
            .arg(request.lease_ms)
            .arg(&*request.owner);
    }
    // One flag per call: a lock of the batch that needs the message sends
    // it for all, which costs the others a PUBLISH nobody hears.
    call.arg(conn.publish_command());
    if requests.iter().any(|request| request.wake_always) {
        call.arg(WAKE_ALWAYS);
    }
    let reply: Vec<Value> = match call.run(conn, "release", limit).await {
        Err(error) if requests.len() > 1 && refused_before_running(&error) => {
            let alone = requests.iter().map(|request| {
                let mut conn = conn.clone();
                async move { release(&mut conn, request, limit).await }
            });
            return Ok(join_all(alone).await);
        }
        reply => reply?,
    };
    per_request("release", requests, &reply, released_entry)
}

/// True when the server refused a whole call for a key this user may not
/// touch. Redis checks a script's KEYS against the ACL before it runs it,
/// so nothing ran, and each lock can be sent alone; the script catches
/// refusals of its own commands per lock, so none reaches here from within.
fn refused_before_running(error: &Error) -> bool {
    matches!(error, Error::Redis { source, .. } if source.code() == Some("NOPERM"))
}

/// A refusal the script caught for one lock (`{-5, message}`), as the
/// error a call for that lock alone gets: `code()` answers the server's
/// code (`NOPERM`...).
fn refused(op: &'static str, message: &Value) -> Error {
    let message = match message {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        other => format!("{other:?}"),
    };
    let (code, detail) = match message.split_once(' ') {
        Some((code, detail)) => (code.to_owned(), Some(detail.to_owned())),
        None => (message, None),
    };
    Error::Redis {
        op,
        source: redis::make_extension_error(code, detail),
    }
}

/// The integers of a reply entry; `None` when one is not an integer.
fn integers(entry: &[Value]) -> Option<Vec<i64>> {
    entry
        .iter()
        .map(|value| match value {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// Splits a reply of two entries per request among the requests.
fn per_request<T>(
    op: &'static str,
    requests: &[Request],
    reply: &[Value],
    parse: impl Fn(&Request, &[Value]) -> Result<T>,
) -> Result<Vec<Result<T>>> {
    if reply.len() != 2 * requests.len() {
        return Err(Error::Protocol {
            op,
            detail: format!("{} entries for {} requests", reply.len(), requests.len()),
        });
    }
    Ok(requests
        .iter()
        .zip(reply.chunks(2))
        .map(|(request, entry)| parse(request, entry))
        .collect())
}

/// The acquire script followed by `WAIT replicas timeout` in one pipeline, so
/// both run on one server connection: WAIT covers the writes of the
/// connection it runs on, and a reconnection in between would make it
/// confirm nothing. A hold the replicas did not confirm in time is given
/// back. One round trip (two the first time after a server restart, to load
/// the script).
pub(crate) async fn acquire_replicated(
    conn: &mut Connection,
    request: &Request,
    sent_at: LeaseInstant,
    limit: Duration,
    wait: ReplicaWait,
) -> Result<LockReply> {
    let wait_ms = wait.timeout.as_millis() as u64;
    let call = async {
        // On a cluster the re-send-safe form, for redis-rs's own re-sends.
        let form = crate::lock::scripts::ACQUIRE.pipelined(conn, &request.keys.key);
        let mut invocation = form.script.key(&*request.keys.key);
        invocation
            .key(request.keys.token_name())
            .key(request.keys.precedence_name());
        if let Some((record, _)) = &form.record {
            invocation.key(record);
        }
        invocation
            .arg(request.lease_ms)
            .arg(&*request.owner)
            .arg(request.waited_ms);
        invocation.arg(&claim_terms()[..]);
        if let Some((_, keep_ms)) = &form.record {
            invocation.arg(keep_ms);
        }
        let pipeline = |conn: &Connection| {
            let mut pipeline = redis::pipe();
            pipeline.add_command(invocation.command(conn));
            if wait.fsync {
                pipeline
                    .cmd("WAITAOF")
                    .arg(1)
                    .arg(wait.replicas)
                    .arg(wait_ms);
            } else {
                pipeline.cmd("WAIT").arg(wait.replicas).arg(wait_ms);
            }
            pipeline
        };
        // The server may have lost the script or the library (restart,
        // failover): load it and send again. Twice at most: a library the
        // server now refuses turns the client to EVALSHA, whose script may
        // be missing too.
        let mut loads = 0;
        loop {
            match pipeline(conn)
                .query_async::<(Vec<Value>, Value)>(conn)
                .await
            {
                Err(error)
                    if loads < 2
                        && invocation
                            .load_missing(conn, &error)
                            .await
                            .map_err(|error| Error::from_redis("acquire", error))? =>
                {
                    loads += 1;
                }
                done => break done.map_err(|error| Error::from_redis("acquire", error)),
            }
        }
    };
    let (reply, acknowledged) = bounded("acquire", limit + wait.timeout, call).await?;
    let attempt = parse_acquire(request, &reply, sent_at)?;
    let (acknowledged, wanted) = copies_confirmed(&acknowledged, wait);
    if matches!(attempt, LockReply::Acquired { .. }) && acknowledged < wanted {
        // Not confirmed is not held: give it back now rather than at lease end.
        if let Err(error) = release(conn, request, limit).await {
            debug!(lock = %request.keys.key, %error, "redlatch: undoing an unconfirmed acquire failed");
        }
        return Err(Error::ReplicasNotConfirmed {
            name: request.keys.key.to_string(),
            acknowledged,
            wanted,
            timeout: wait.timeout,
        });
    }
    Ok(attempt)
}

/// Copies confirmed, and copies wanted, from the reply of `WAIT` (replicas
/// that received the writes) or `WAITAOF` (`[local, replicas]` fsynced; the
/// master's own fsync counts as one copy).
fn copies_confirmed(reply: &Value, wait: ReplicaWait) -> (u32, u32) {
    let count = |value: &Value| match value {
        Value::Int(n) => u32::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    match reply {
        Value::Array(counts) if wait.fsync => (
            counts.iter().take(2).map(count).sum(),
            wait.replicas.saturating_add(1),
        ),
        other => (count(other), wait.replicas),
    }
}

fn parse_acquire(request: &Request, reply: &[Value], sent_at: LeaseInstant) -> Result<LockReply> {
    if let [Value::Int(-5), message] = reply {
        return Err(refused("acquire", message));
    }
    let Some(reply) = integers(reply) else {
        return Err(Error::Protocol {
            op: "acquire",
            detail: format!("{reply:?}"),
        });
    };
    if let Some(acquired) = Acquired::read(&reply, sent_at) {
        return Ok(LockReply::Acquired(acquired));
    }
    match reply.as_slice() {
        [0, pttl_ms] => Ok(LockReply::Held {
            pttl_ms: *pttl_ms,
            first: false,
        }),
        [3, pttl_ms] => Ok(LockReply::Held {
            pttl_ms: *pttl_ms,
            first: true,
        }),
        other => Err(unexpected("acquire", &request.keys.key, other)),
    }
}

/// The release script's optional last argument: publish on every last
/// hold. Absent, only on one a waiter marked (and no argument to build and
/// send on the common call).
const WAKE_ALWAYS: &str = "1";

/// True when someone holds the lock (its key exists). One round trip, at
/// most `limit`.
pub(crate) async fn is_taken(
    conn: &mut Connection,
    keys: &LockKeys,
    limit: Duration,
) -> Result<bool> {
    let call = async {
        redis::cmd("EXISTS")
            .arg(&*keys.key)
            .query_async::<bool>(conn)
            .await
            .map_err(|error| Error::from_redis("acquire", error))
    };
    bounded("acquire", limit, call).await
}

/// Withdraws `request.owner`'s claim to the lock's next turn, if it stands
/// (a waiter that gave up). One round trip, at most `limit`.
pub(crate) async fn withdraw_precedence(
    conn: &mut Connection,
    request: &Request,
    limit: Duration,
) -> Result<bool> {
    let call = async {
        crate::lock::scripts::PRECEDENCE_LEAVE
            .key(request.keys.precedence())
            .arg(&*request.owner)
            .invoke_async::<i64>(conn)
            .await
            .map_err(|error| Error::from_redis("withdraw precedence", error))
    };
    Ok(bounded("withdraw precedence", limit, call).await? == 1)
}

/// Drops one hold of `request.owner`. One round trip, each send at most
/// `limit` (on a cluster a failed send is sent again: [`crate::scripts::Call::run`]).
pub(crate) async fn release(
    conn: &mut Connection,
    request: &Request,
    limit: Duration,
) -> Result<Released> {
    let mut call = crate::lock::scripts::RELEASE.call(conn);
    call.key(&request.keys.key)
        .arg(request.keys.channel_name())
        .arg(request.lease_ms)
        .arg(&*request.owner)
        .arg(conn.publish_command());
    if request.wake_always {
        call.arg(WAKE_ALWAYS);
    }
    let reply: Vec<Value> = call.run(conn, "release", limit).await?;
    released_entry(request, &reply)
}

/// Reads one lock's entry of the release script's reply: as [`released`],
/// and `{-5, message}` refused by the server.
fn released_entry(request: &Request, entry: &[Value]) -> Result<Released> {
    if let [Value::Int(-5), message] = entry {
        return Err(refused("release", message));
    }
    match integers(entry) {
        Some(entry) => released(&request.keys.key, &entry),
        None => Err(Error::Protocol {
            op: "release",
            detail: format!("{entry:?}"),
        }),
    }
}

/// Raises the lock's fencing counter to at least `token` if `request.owner`
/// still holds the lock (Redlock's token write-back). One round trip, at
/// most `limit`. Returns false when the owner no longer holds it.
pub(crate) async fn raise_token(
    conn: &mut Connection,
    request: &Request,
    token: u64,
    limit: Duration,
) -> Result<bool> {
    let call = async {
        crate::lock::scripts::RAISE_TOKEN
            .key(&*request.keys.key)
            .key(request.keys.token())
            .arg(&*request.owner)
            .arg(token)
            .invoke_async::<i64>(conn)
            .await
            .map_err(|error| Error::from_redis("raise token", error))
    };
    Ok(bounded("raise token", limit, call).await? == 1)
}

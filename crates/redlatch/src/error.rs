//! The one error type of the library.

use std::time::Duration;

/// Everything that can go wrong in redlatch.
///
/// Each variant says what the caller can do about it. The enum is
/// `#[non_exhaustive]`: later versions may add variants, so match with a
/// wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock name is empty or longer than [`MAX_NAME_LEN`](crate::Settings::MAX_NAME_LEN)
    /// bytes (after the key prefix). Fix the input; retrying cannot help.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The name as given (truncated to 64 bytes when very long).
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// An owner name given to [`Lock::with_owner`](crate::Lock::with_owner) is
    /// empty, too long, or uses a reserved form (a leading `#`, a trailing
    /// `:write`). Fix the input.
    #[error("invalid owner {owner:?}: {reason}")]
    InvalidOwner {
        /// The owner as given (truncated to 64 bytes when very long).
        owner: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A duration is zero, below one millisecond, or absurdly long. Fix the input.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidDuration {
        /// Which setting or argument it was (`"lease"`, `"connect timeout"`, ...).
        what: &'static str,
        /// The value given.
        value: Duration,
        /// Why it was refused.
        reason: &'static str,
    },

    /// The Redis URL or another client setting cannot be used. Fix the configuration.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// A bounded acquire ([`Lock::acquire_within`](crate::Lock::acquire_within),
    /// or `acquire` under the client's [`wait_timeout`](crate::Settings::wait_timeout))
    /// gave up: another owner held the lock for the whole wait. Retry later
    /// or give up.
    #[error("lock {name:?} not acquired within {waited:?}")]
    Timeout {
        /// The lock name.
        name: String,
        /// How long the call waited.
        waited: Duration,
    },

    /// The guard's lock is no longer held by its owner: it expired, was
    /// force-unlocked, or was taken over. Work done under it may have
    /// overlapped with another holder; use the fencing token to reject stale
    /// writes. Acquire again to continue.
    #[error("lock {name:?} is not held by this owner (expired, force-unlocked or taken over)")]
    NotHeld {
        /// The lock name.
        name: String,
    },

    /// The lock's key exists in Redis but holds another type (a string, a list...),
    /// or a value the lock cannot use: a hold count that is not an integer, or a
    /// fencing counter that is not a non-negative 64-bit integer. Something else
    /// uses or corrupted that key: pick another lock name or key prefix. Only the
    /// lock concerned fails (the other locks of a coalesced call get their own
    /// outcomes) and nothing is written for it; a release that finds its hold
    /// count corrupt removes the hold (it could not be counted) and fails so.
    #[error("key {key:?} holds a value that is not a lock (WRONGTYPE)")]
    WrongType {
        /// The Redis key.
        key: String,
    },

    /// Redis could not be reached, the connection broke during the call, or
    /// the server answered that it cannot serve for now (`CLUSTERDOWN`,
    /// `TRYAGAIN`, `MASTERDOWN`, `LOADING`: a failover or a load under way).
    /// Safe to retry once Redis is back. When the connection broke during
    /// the call its outcome is unknown (see the method's docs for what it may
    /// have left behind); releases and force-unlock say so with
    /// [`Error::OutcomeUnknown`] instead.
    #[error("redis unavailable during {op}: {source}")]
    Unavailable {
        /// What the library was doing.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },

    /// Redis did not answer within `limit`: the client's response timeout
    /// (one call), the caller's wait (a bounded acquire, whose every call,
    /// retry and back-off fits in its wait), or a Redlock's node timeout. The
    /// server is slow, paused or overloaded; the command may or may not have
    /// run (an anonymous owner's possible hold is given back in the
    /// background).
    #[error("redis did not answer {op} within {limit}")]
    ResponseTimeout {
        /// What the library was doing.
        op: &'static str,
        /// The time limit that ran out.
        limit: TimeLimit,
    },

    /// Opening the connection took longer than `limit`: the server accepts
    /// connections but does not answer (it is paused, frozen or overloaded),
    /// or the port speaks another protocol (a `rediss://` URL for a port
    /// without TLS). One server gets the
    /// [connect timeout](crate::Settings::connect_timeout) in all, retries
    /// included; a cluster or a Sentinel group, which may try several
    /// nodes, gets the connect timeout for each attempt and its retries.
    /// Nothing was sent that changes data; safe to retry once the server
    /// answers again.
    #[error("could not connect within {limit:?}{}", tls_hint(*tls))]
    ConnectTimeout {
        /// The time allowed, which ran out.
        limit: Duration,
        /// The URL asked for TLS (`rediss://`): a port without TLS never
        /// answers a TLS handshake, which looks like this timeout.
        tls: bool,
    },

    /// A TLS file ([`TlsFiles`](crate::TlsFiles)) cannot be used: it is
    /// missing or unreadable, holds no PEM certificate or key, the private
    /// key does not belong to the certificate, or the certificate is one
    /// the TLS stack refuses (X.509 v1). Fix the file; retrying cannot help.
    #[error("{field} = {}: {reason}", path.display())]
    TlsFile {
        /// The setting that names the file: `tls.ca`, `tls.cert` or `tls.key`.
        field: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it, and how to fix it where that is known.
        reason: String,
    },

    /// The TLS handshake failed because of a certificate: the server's,
    /// which this client refuses (unknown CA, wrong name, expired, X.509
    /// v1...), or this client's, which the server refused. `whose` says
    /// which; the message says how to fix it where that is known. Fix the
    /// certificates; retrying cannot help.
    #[error("TLS: {whose} certificate was refused: {detail}")]
    TlsCertificate {
        /// `"the server's"` or `"our client"`.
        whose: &'static str,
        /// What the TLS stack said, and the fix where it is known.
        detail: String,
    },

    /// The URL names one node of a Redis Cluster, which serves only the
    /// keys of its own slots, on a connection that is not a cluster one:
    /// the server answered with a redirection (`MOVED`, `ASK`) or refused
    /// keys of several hash slots (`CROSSSLOT`: the server-wide fencing
    /// counter beside a lock's keys), or
    /// [`Client::locks`](crate::Client::locks) found `cluster_enabled:1`
    /// (its walk would miss the other nodes' locks). Connect to it as a
    /// cluster ([`ClientBuilder::cluster`](crate::ClientBuilder::cluster),
    /// or `mode = "cluster"` in a [`Deployment`](crate::Deployment) file).
    #[error("the server is a Redis Cluster node ({detail}); connect to it as a cluster")]
    ClusterNode {
        /// What the library was doing.
        op: &'static str,
        /// What showed it: the redirection, or the server's `INFO`.
        detail: String,
    },

    /// A call that changes data (a release, a force-unlock) was sent, and
    /// neither its reply nor the reply to sending the same request again came
    /// back: the connection broke or Redis did not answer in time. It may or
    /// may not have taken effect. On a Redis Cluster the library asks again
    /// for the recorded outcome before it gives up, so this means Redis stayed
    /// unreachable; on one server or under Sentinel a lost reply cannot be
    /// asked for again.
    ///
    /// Do not repeat the call blindly (a semaphore release repeated would give
    /// permits back twice; [`is_transient`](Error::is_transient) is false).
    /// A lock or expirable permit that was not released is freed when its
    /// lease runs out at the latest, since nobody renews it any more; read the
    /// current state ([`Lock::status`](crate::Lock::status),
    /// [`Semaphore::available_permits`](crate::Semaphore::available_permits))
    /// once Redis is back if it matters.
    #[error("outcome unknown: {op} was sent but its reply was lost ({source})")]
    OutcomeUnknown {
        /// What the library was doing.
        op: &'static str,
        /// Why no reply came back.
        #[source]
        source: Box<Error>,
    },

    /// Redis refused the command (authentication, ACL permission, out of
    /// memory, script error...). Usually a configuration problem; the message
    /// comes from the server.
    #[error("redis refused {op}: {source}")]
    Redis {
        /// What the library was doing.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },

    /// A script answered with something the library does not understand
    /// (another program replaced a script under the same SHA?). Report a bug.
    #[error("unexpected reply to {op}: {detail}")]
    Protocol {
        /// What the library was doing.
        op: &'static str,
        /// What was wrong with the reply.
        detail: String,
    },

    /// A permit count is zero, or too large for the semaphore. Fix the input.
    #[error("invalid permit count {permits} for semaphore {name:?}: {reason}")]
    InvalidPermits {
        /// The semaphore name.
        name: String,
        /// The count given.
        permits: i64,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A count-down latch's count is zero, or too large for Redis to count
    /// down (above 2^63 − 1). Fix the input.
    #[error("invalid count {count} for count-down latch {name:?}: {reason}")]
    InvalidCount {
        /// The latch name.
        name: String,
        /// The count given.
        count: u64,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A semaphore call gave up waiting: not enough permits were free for the
    /// whole wait. Retry later or give up.
    #[error("semaphore {name:?}: {permits} permit(s) not acquired within {waited:?}")]
    NoPermits {
        /// The semaphore name.
        name: String,
        /// How many permits were asked for.
        permits: u32,
        /// How long the call waited.
        waited: Duration,
    },

    /// A semaphore's or count-down latch's key exists in Redis but holds
    /// something other than the value it keeps there (a permit count, its
    /// permits' expiries, a latch's count).
    /// Something else uses that key: pick another name or key prefix.
    #[error("key {key:?} holds a value that is not {expected}")]
    WrongValue {
        /// The Redis key.
        key: String,
        /// What the key should hold.
        expected: &'static str,
    },

    /// A blocking call (`redlatch::blocking`) could not be carried
    /// out because the facade's runtime has stopped (the process is shutting
    /// down, or a task panicked). Create a new blocking client.
    #[error("the blocking facade's runtime stopped during {op}")]
    RuntimeGone {
        /// What the library was doing.
        op: &'static str,
    },

    /// The lock was acquired on the master, but fewer replicas than
    /// [`ClientBuilder::wait_for_replicas`](crate::ClientBuilder::wait_for_replicas)
    /// asks for confirmed it in time; the acquisition was undone. A replica is
    /// down, lagging or unreachable: retrying may succeed once it catches up.
    #[error(
        "lock {name:?}: {acknowledged} of {wanted} replicas confirmed within {timeout:?}; acquisition undone"
    )]
    ReplicasNotConfirmed {
        /// The lock name.
        name: String,
        /// Replicas that confirmed (with
        /// [`wait_for_fsync`](crate::ClientBuilder::wait_for_fsync): copies
        /// fsynced, the master's own counted as one).
        acknowledged: u32,
        /// Replicas asked for (with `wait_for_fsync`: replicas + 1, the master's copy).
        wanted: u32,
        /// How long the master waited for them.
        timeout: Duration,
    },

    /// The call would wait for itself forever: an owner of a
    /// [`ReadWriteLock`](crate::ReadWriteLock) asked to write while it reads
    /// (there is no upgrade). Release the read holds first.
    #[error("lock {name:?}: {reason}")]
    WouldDeadlock {
        /// The lock name.
        name: String,
        /// What the caller holds that it would wait for.
        reason: &'static str,
    },

    /// The acquire would close a wait-for cycle: the lock's holder waits,
    /// directly or through other parties, for a lock this caller's party
    /// holds (deadlock detection, [`party_of`](crate::deadlock::party_of)).
    /// Waiting would never end; only this acquire of the cycle is refused,
    /// the others keep waiting. Release what this party holds (drop its
    /// guards) and try again, or take the locks in one order. Not
    /// transient: retrying at once finds the same cycle.
    #[error("{}", crate::wait_link::describe(cycle))]
    Deadlock {
        /// The cycle: the first link's lock is the one this acquire waited
        /// for; each link's holder waits for the next link's lock; the
        /// last link's holder is this caller's own party.
        cycle: Vec<crate::wait_link::WaitLink>,
    },

    /// The server lacks something the call needs: at connect, scripting (a
    /// Valkey 9.1 server without its Lua module lists `EVAL` and `FUNCTION`
    /// but runs no script, and every lock but the token lock runs as one);
    /// on a [`TokenLock`](crate::TokenLock) served without scripting, what
    /// only a script does (a fenced acquire; a watchdog's renewal without
    /// `SET … IFEQ`). [`Client::capabilities`](crate::Client::capabilities)
    /// would have said [`Support::Absent`](crate::Support::Absent). Use a
    /// server that has it (load the module), or (token lock) a fixed lease,
    /// no fencing; retrying cannot help.
    #[error("{server} lacks {missing}: {detail}")]
    ServerLacks {
        /// The server's kind and version (`valkey 9.1.2`), or `the server`
        /// when it would not say.
        server: String,
        /// What it lacks: `"scripting"`, `"SET IFEQ or scripting"`...
        missing: &'static str,
        /// What showed it, and what to do.
        detail: String,
    },

    /// A [`Redlock`](crate::Redlock) call did not reach a majority of its
    /// nodes: too few answered in time, or too few confirmed. Each failure
    /// names the node and why. Safe to retry once enough nodes are back;
    /// whatever the call took on a minority of nodes has been given back (or
    /// expires with its lease).
    #[error("{}", quorum_message(op, name, *needed, *nodes, *confirmed, failures))]
    QuorumFailed {
        /// What the library was doing (`"acquire"`, `"release"`, `"renew"`...).
        op: &'static str,
        /// The lock name.
        name: String,
        /// How many nodes had to confirm: a majority of `nodes`.
        needed: usize,
        /// How many nodes the Redlock has.
        nodes: usize,
        /// How many nodes confirmed.
        confirmed: usize,
        /// The nodes that did not answer, or answered with an error.
        failures: Vec<NodeFailure>,
    },
}

/// Which time limit ran out, in [`Error::ResponseTimeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeLimit {
    /// The client's [response timeout](crate::Settings::response_timeout):
    /// one call.
    Response,
    /// The caller's wait (`acquire_within`'s `wait`): the whole acquire,
    /// its calls, retries and back-offs included.
    Wait(Duration),
    /// A [`Redlock`](crate::Redlock)'s node timeout
    /// ([`Redlock::with_node_timeout`](crate::Redlock::with_node_timeout)):
    /// one node's share of one call.
    Node(Duration),
}

impl std::fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeLimit::Response => f.write_str("the response timeout"),
            TimeLimit::Wait(wait) => write!(f, "the caller's wait ({wait:?})"),
            TimeLimit::Node(limit) => write!(f, "the node timeout ({limit:?})"),
        }
    }
}

/// One node of a [`Redlock`](crate::Redlock) that failed a call, in
/// [`Error::QuorumFailed`].
#[derive(Debug)]
pub struct NodeFailure {
    /// The node: its URL (password hidden) or its label.
    pub node: String,
    /// What went wrong there.
    pub error: Box<Error>,
}

fn tls_hint(tls: bool) -> &'static str {
    if tls {
        " (a rediss:// URL: does that port speak TLS?)"
    } else {
        ""
    }
}

fn quorum_message(
    op: &str,
    name: &str,
    needed: usize,
    nodes: usize,
    confirmed: usize,
    failures: &[NodeFailure],
) -> String {
    let mut text =
        format!("{op} of lock {name:?}: {confirmed} of {nodes} nodes confirmed, {needed} needed");
    if !failures.is_empty() {
        let listed: Vec<String> = failures
            .iter()
            .map(|failure| format!("{} ({})", failure.node, failure.error))
            .collect();
        text.push_str("; failed: ");
        text.push_str(&listed.join(", "));
    }
    text
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The server is there but cannot serve for now (a cluster or Sentinel
/// failover under way, a dataset loading): worth a retry.
pub(crate) fn unavailable_for_now(error: &redis::RedisError) -> bool {
    matches!(
        error.code(),
        Some("CLUSTERDOWN" | "TRYAGAIN" | "MASTERDOWN" | "LOADING")
    )
}

impl Error {
    /// Sorts a redis-rs error into the variant a caller can act on.
    /// The same failure again, for another caller of one coalesced call
    /// (`lock/coalesce.rs`): every caller of a batch gets the batch's error.
    pub(crate) fn for_another_caller(&self) -> Error {
        match self {
            Error::ResponseTimeout { op, limit } => Error::ResponseTimeout { op, limit: *limit },
            Error::Unavailable { op, source } => Error::Unavailable {
                op,
                source: source.clone(),
            },
            Error::Redis { op, source } => Error::Redis {
                op,
                source: source.clone(),
            },
            Error::RuntimeGone { op } => Error::RuntimeGone { op },
            Error::ClusterNode { op, detail } => Error::ClusterNode {
                op,
                detail: detail.clone(),
            },
            other => Error::Protocol {
                op: "coalesced call",
                detail: other.to_string(),
            },
        }
    }

    pub(crate) fn from_redis(op: &'static str, source: redis::RedisError) -> Error {
        if source.is_timeout() {
            Error::ResponseTimeout {
                op,
                limit: TimeLimit::Response,
            }
        } else if matches!(source.code(), Some("MOVED" | "ASK")) {
            // Only a plain connection passes these on: the cluster client
            // follows them.
            Error::ClusterNode {
                op,
                detail: format!("it redirected {op}: {source}"),
            }
        } else if source.code() == Some("CROSSSLOT") {
            // Only a cluster node refuses keys of several slots, and a
            // plain connection's call names the server-wide fencing counter
            // beside the lock's keys: the node says so before any MOVED.
            Error::ClusterNode {
                op,
                detail: format!("it refused {op} for keys of several hash slots: {source}"),
            }
        } else if source.is_io_error()
            || source.is_connection_dropped()
            || source.is_connection_refusal()
            || unavailable_for_now(&source)
        {
            Error::Unavailable { op, source }
        } else if source.code() == Some("WRONGTYPE") {
            Error::WrongType {
                key: source.detail().unwrap_or_default().to_owned(),
            }
        } else {
            Error::Redis { op, source }
        }
    }

    /// True when a call that failed this way may have run in Redis all the
    /// same: its reply was lost (a broken connection, a timeout). False when
    /// it cannot have run: the connection was refused, or the server answered
    /// that it cannot serve for now.
    pub(crate) fn may_have_run(&self) -> bool {
        match self {
            Error::ResponseTimeout { .. } | Error::OutcomeUnknown { .. } => true,
            Error::Unavailable { source, .. } => {
                !source.is_connection_refusal() && source.code().is_none()
            }
            _ => false,
        }
    }

    /// The error a call that changes data reports: [`Error::OutcomeUnknown`]
    /// when it may have run, itself otherwise.
    pub(crate) fn unknown_outcome(self, op: &'static str) -> Error {
        if self.may_have_run() && !matches!(self, Error::OutcomeUnknown { .. }) {
            Error::OutcomeUnknown {
                op,
                source: Box::new(self),
            }
        } else {
            self
        }
    }

    /// True when the error comes from the connection rather than the request:
    /// the same call may succeed once Redis is reachable again. False for
    /// [`Error::OutcomeUnknown`]: the call may have taken effect, and
    /// repeating it could apply it twice.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. }
                | Error::ResponseTimeout { .. }
                | Error::ConnectTimeout { .. }
                | Error::QuorumFailed { .. }
        )
    }
}

/// Shortens user input quoted back in error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 64;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(reply: &[u8]) -> redis::RedisError {
        match redis::parse_redis_value(reply) {
            Ok(redis::Value::ServerError(error)) => error.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn servers_that_cannot_serve_for_now_give_transient_errors() {
        for reply in [
            &b"-CLUSTERDOWN The cluster is down\r\n"[..],
            b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
            b"-MASTERDOWN Link with MASTER is down\r\n",
            b"-LOADING Redis is loading the dataset in memory\r\n",
        ] {
            let error = Error::from_redis("acquire", server_error(reply));
            assert!(error.is_transient(), "{error}");
        }
        let refused = Error::from_redis("acquire", server_error(b"-NOPERM no permission\r\n"));
        assert!(matches!(refused, Error::Redis { .. }));
    }

    #[test]
    fn cluster_redirections_on_a_plain_connection_name_the_cluster() {
        let moved = Error::from_redis("acquire", server_error(b"-MOVED 8958 127.0.0.1:7001\r\n"));
        assert!(
            matches!(moved, Error::ClusterNode { op: "acquire", .. }),
            "{moved:?}"
        );
        assert!(moved.to_string().contains("Redis Cluster node"), "{moved}");
        assert!(!moved.is_transient());
        assert!(!moved.may_have_run());
        let ask = Error::from_redis("status", server_error(b"-ASK 8958 127.0.0.1:7001\r\n"));
        assert!(matches!(ask, Error::ClusterNode { .. }), "{ask:?}");
        let cross = Error::from_redis(
            "status",
            server_error(b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"),
        );
        assert!(
            matches!(cross, Error::ClusterNode { op: "status", .. }),
            "{cross:?}"
        );
    }

    #[test]
    fn connect_timeouts_name_the_limit_and_are_transient() {
        let plain = Error::ConnectTimeout {
            limit: Duration::from_secs(2),
            tls: false,
        };
        assert_eq!(plain.to_string(), "could not connect within 2s");
        assert!(plain.is_transient());
        let tls = Error::ConnectTimeout {
            limit: Duration::from_millis(500),
            tls: true,
        };
        assert!(
            tls.to_string().contains("does that port speak TLS?"),
            "{tls}"
        );
    }

    #[test]
    fn only_calls_that_may_have_run_have_an_unknown_outcome() {
        let down = Error::from_redis("release", server_error(b"-CLUSTERDOWN down\r\n"));
        assert!(matches!(
            down.unknown_outcome("release"),
            Error::Unavailable { .. }
        ));
        let dropped = Error::from_redis(
            "release",
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        );
        let unknown = dropped.unknown_outcome("release");
        assert!(matches!(unknown, Error::OutcomeUnknown { .. }), "{unknown}");
        assert!(unknown.to_string().contains("outcome unknown"));
        assert!(!unknown.is_transient());
        let refused = Error::from_redis(
            "release",
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
        );
        assert!(matches!(
            refused.unknown_outcome("release"),
            Error::Unavailable { .. }
        ));
        let timeout = Error::ResponseTimeout {
            op: "release",
            limit: TimeLimit::Response,
        }
        .unknown_outcome("release");
        assert!(matches!(timeout, Error::OutcomeUnknown { .. }));
    }

    #[test]
    fn excerpt_cuts_long_text_on_a_char_boundary() {
        let long = "é".repeat(100);
        let cut = excerpt(&long);
        assert!(cut.len() <= 64 + '…'.len_utf8());
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt("short"), "short");
    }
}

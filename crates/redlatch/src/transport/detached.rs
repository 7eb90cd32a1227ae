//! A last command sent after the client's runtime has stopped: when a
//! program ends with its runtime (the `#[tokio::main]` shape, a CLI that
//! shuts its runtime down before it exits), the client's connections and
//! tasks are gone with it, and what the client leaves in Redis (its holder
//! record) would stay until its TTL. This sends one command on a fresh
//! connection, from a thread of its own with a runtime of its own, and waits
//! for it a bounded time, once per server: after a last word to a server
//! got no answer in time (it stalls), the next ones to it for a while are
//! sent without waiting, so a program that drops many clients of a stalled
//! server waits one limit, not one per client.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClientBuilder;

use crate::transport::subscription::SubscriptionSource;

/// How long after a last word to a server went unanswered the next ones to
/// it do not wait: a holder record's TTL, past which nothing is left for
/// them to delete anyway.
const UNANSWERED_FOR: Duration = Duration::from_secs(5);

/// The servers (by [`Detached::target`]) that left a last word unanswered
/// within the last [`UNANSWERED_FOR`], each with when, in this process.
static UNANSWERED: Mutex<Vec<(Arc<str>, Instant)>> = Mutex::new(Vec::new());

/// Where a last command goes: the servers the client's subscriptions use,
/// which name one server, the Sentinel group's master or a cluster.
#[derive(Clone)]
pub(crate) struct Detached {
    servers: SubscriptionSource,
    /// The servers' name, shared by every client of them in this process.
    target: Arc<str>,
}

impl Detached {
    pub(crate) fn new(servers: SubscriptionSource) -> Detached {
        let target: Arc<str> = match &servers {
            SubscriptionSource::Single(client) => client.get_connection_info().addr().to_string(),
            // The master changes: one name for every Sentinel group.
            SubscriptionSource::Sentinel(_) => "sentinel".to_owned(),
            SubscriptionSource::Cluster { nodes, .. } => nodes
                .iter()
                .map(|node| node.addr().to_string())
                .collect::<Vec<_>>()
                .join(","),
        }
        .into();
        Detached { servers, target }
    }

    /// Sends `command` and waits at most `limit` for its answer (connecting
    /// included); true when Redis answered without an error. Blocks the
    /// calling thread, never a runtime: the command runs on a thread of its
    /// own, which is left to finish by itself when `limit` passes. Within
    /// [`UNANSWERED_FOR`] after a last word to the same servers went
    /// unanswered, it does not wait at all (false).
    pub(crate) fn send_blocking(&self, command: redis::Cmd, limit: Duration) -> bool {
        let stalled = unanswered()
            .iter()
            .any(|(target, at)| *target == self.target && at.elapsed() < UNANSWERED_FOR);
        let (done, answer) = mpsc::channel();
        let servers = self.servers.clone();
        let spawned = std::thread::Builder::new()
            .name("redlatch-last-word".to_owned())
            .spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let sent = runtime.block_on(async {
                    tokio::time::timeout(limit, send(&servers, &command))
                        .await
                        .unwrap_or(Err(redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "no answer in time",
                        ))))
                });
                let _ = done.send(sent.is_ok());
            });
        if spawned.is_err() || stalled {
            return false;
        }
        match answer.recv_timeout(limit) {
            Ok(answered) => answered,
            Err(_) => {
                let mut unanswered = unanswered();
                unanswered.retain(|(_, at)| at.elapsed() < UNANSWERED_FOR);
                unanswered.push((self.target.clone(), Instant::now()));
                false
            }
        }
    }
}

/// The servers that left a last word unanswered lately (a lock poisoned by
/// a panicking writer still holds sound entries).
fn unanswered() -> MutexGuard<'static, Vec<(Arc<str>, Instant)>> {
    UNANSWERED.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn send(servers: &SubscriptionSource, command: &redis::Cmd) -> redis::RedisResult<()> {
    match servers {
        SubscriptionSource::Single(client) => {
            let mut conn = client.get_multiplexed_async_connection().await?;
            command.query_async(&mut conn).await
        }
        SubscriptionSource::Sentinel(sentinel) => {
            let client = sentinel.master_client().await?;
            let mut conn = client.get_multiplexed_async_connection().await?;
            command.query_async(&mut conn).await
        }
        SubscriptionSource::Cluster {
            nodes,
            connect_timeout,
            certs,
            ..
        } => {
            let client = certs
                .cluster(ClusterClientBuilder::new(nodes.clone()))
                .connection_timeout(*connect_timeout)
                .retries(0)
                .build()?;
            let mut conn = client.get_async_connection().await?;
            command.query_async(&mut conn).await
        }
    }
}

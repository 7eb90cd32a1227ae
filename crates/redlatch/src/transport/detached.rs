//! A last command sent after the client's runtime has stopped: when a
//! program ends with its runtime (the `#[tokio::main]` shape, a CLI that
//! shuts its runtime down before it exits), the client's connections and
//! tasks are gone with it, and what the client leaves in Redis (its holder
//! record) would stay until its TTL. This sends one command on a fresh
//! connection, from a thread of its own with a runtime of its own, and waits
//! for it a bounded time.

use std::sync::mpsc;
use std::time::Duration;

use redis::cluster::ClusterClientBuilder;

use crate::transport::subscription::SubscriptionSource;

/// Where a last command goes: the servers the client's subscriptions use,
/// which name one server, the Sentinel group's master or a cluster.
#[derive(Clone)]
pub(crate) struct Detached {
    servers: SubscriptionSource,
}

impl Detached {
    pub(crate) fn new(servers: SubscriptionSource) -> Detached {
        Detached { servers }
    }

    /// Sends `command` and waits at most `limit` for its answer (connecting
    /// included); true when Redis answered without an error. Blocks the
    /// calling thread, never a runtime: the command runs on a thread of its
    /// own, which is left to finish by itself when `limit` passes.
    pub(crate) fn send_blocking(&self, command: redis::Cmd, limit: Duration) -> bool {
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
        spawned.is_ok() && answer.recv_timeout(limit).unwrap_or(false)
    }
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

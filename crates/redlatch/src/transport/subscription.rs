//! The subscription connection behind wake-ups: plain pub/sub on one server
//! (or the master Sentinel names), sharded pub/sub on a Redis Cluster (or
//! plain there too, when set so for Redisson clients that do not shard).
//!
//! The wake-up task (`engine/wakeup.rs`) opens a [`Session`] from a
//! [`SubscriptionSource`], subscribes lock channels on it, and reads
//! [`Event`]s until it breaks; then it opens a new one.

use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionInfo, ProtocolVersion, PushInfo, PushKind, RedisResult, Value};
use tokio::sync::mpsc;

use crate::settings::cluster_pubsub::ClusterPubSub;
use crate::transport::sentinel::SentinelConnection;
use crate::transport::tls::Certificates;

/// Where subscription connections come from.
#[derive(Clone)]
pub(crate) enum SubscriptionSource {
    /// One server: `SUBSCRIBE` on a connection of its own.
    Single(redis::Client),
    /// The master Sentinel names now, looked up at each (re)connection.
    Sentinel(SentinelConnection),
    /// A cluster: `SSUBSCRIBE` (or `SUBSCRIBE`, plain) on a RESP3 cluster
    /// connection of its own, which sends each channel's subscription to the
    /// shard that owns it and moves it after a failover or resharding.
    Cluster {
        nodes: Vec<ConnectionInfo>,
        connect_timeout: Duration,
        certs: Certificates,
        pubsub: ClusterPubSub,
    },
}

/// What a session reports.
pub(crate) enum Event {
    /// A message arrived on this channel; with the fencing token it carries
    /// when it hands a fair lock over ([`handed_token`]).
    Message(String, Option<u64>),
    /// A connection under the session was lost and re-established: messages
    /// may have been missed, waiters should check their locks again.
    Resync,
}

/// One live subscription connection.
pub(crate) enum Session {
    Plain {
        sink: PubSubSink,
        stream: PubSubStream,
        /// Connected to a master found through Sentinel.
        through_sentinel: bool,
    },
    Cluster {
        conn: ClusterConnection,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        pubsub: ClusterPubSub,
    },
}

impl SubscriptionSource {
    /// Opens a session.
    pub(crate) async fn open(&self) -> RedisResult<Session> {
        match self {
            SubscriptionSource::Single(client) => Ok(Session::plain(client, false).await?),
            SubscriptionSource::Sentinel(sentinel) => {
                Ok(Session::plain(&sentinel.master_client().await?, true).await?)
            }
            SubscriptionSource::Cluster {
                nodes,
                connect_timeout,
                certs,
                pubsub,
            } => {
                let (sender, pushes) = mpsc::unbounded_channel();
                let client = certs
                    .cluster(ClusterClientBuilder::new(nodes.clone()))
                    .connection_timeout(*connect_timeout)
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(sender)
                    .build()?;
                let conn = client.get_async_connection().await?;
                Ok(Session::Cluster {
                    conn,
                    pushes,
                    pubsub: *pubsub,
                })
            }
        }
    }
}

impl Session {
    async fn plain(client: &redis::Client, through_sentinel: bool) -> RedisResult<Session> {
        let (sink, stream) = client.get_async_pubsub().await?.split();
        Ok(Session::Plain {
            sink,
            stream,
            through_sentinel,
        })
    }

    /// True when a silent connection must be noticed by the session itself:
    /// a master named by Sentinel may be frozen or cut off while a replica
    /// replaces it, and its connection never breaks. (On one server there
    /// is nowhere else to go; the cluster client watches its own nodes.)
    pub(crate) fn needs_liveness_checks(&self) -> bool {
        matches!(
            self,
            Session::Plain {
                through_sentinel: true,
                ..
            }
        )
    }

    /// One PING on the subscription connection.
    pub(crate) async fn ping(&mut self) -> RedisResult<()> {
        match self {
            Session::Plain { sink, .. } => sink.ping::<Value>().await.map(drop),
            Session::Cluster { .. } => Ok(()),
        }
    }

    pub(crate) async fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            Session::Plain { sink, .. } => sink.subscribe(channel).await,
            Session::Cluster {
                conn,
                pubsub: ClusterPubSub::Sharded,
                ..
            } => conn.ssubscribe(channel).await,
            Session::Cluster { conn, .. } => conn.subscribe(channel).await,
        }
    }

    pub(crate) async fn unsubscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            Session::Plain { sink, .. } => sink.unsubscribe(channel).await,
            Session::Cluster {
                conn,
                pubsub: ClusterPubSub::Sharded,
                ..
            } => conn.sunsubscribe(channel).await,
            Session::Cluster { conn, .. } => conn.unsubscribe(channel).await,
        }
    }

    /// The next event; `None` when the session is over. Cancel safe.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        match self {
            Session::Plain { stream, .. } => stream.next().await.map(|message| {
                let handed = handed_token(message.get_payload_bytes());
                Event::Message(message.get_channel_name().to_owned(), handed)
            }),
            Session::Cluster { pushes, .. } => loop {
                let push = pushes.recv().await?;
                match push.kind {
                    PushKind::SMessage | PushKind::Message => {
                        if let Some(channel) = push.data.first().and_then(text) {
                            let handed = match push.data.get(1) {
                                Some(Value::BulkString(payload)) => handed_token(payload),
                                _ => None,
                            };
                            return Some(Event::Message(channel, handed));
                        }
                    }
                    // The cluster client resubscribes by itself once it reconnects.
                    PushKind::Disconnection => return Some(Event::Resync),
                    _ => {}
                }
            },
        }
    }
}

/// What a fair release publishes to the waiter it handed the lock to,
/// before the hold's fencing token (`HANDED` in scripts/lib/fair_line.lua).
const HANDED: &[u8] = b"redlatch:handed:";

/// The fencing token of a hand-off message; `None` for any other message
/// (an unlock message, `0`, only wakes).
pub(crate) fn handed_token(payload: &[u8]) -> Option<u64> {
    let digits = payload.strip_prefix(HANDED)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

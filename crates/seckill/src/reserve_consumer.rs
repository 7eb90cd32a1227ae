//! The `reserve` strategy's second half: from the stream `{seckill}:orders` to
//! the database, with no accepted order lost when an instance dies.
//!
//! Each instance runs one consumer, named `instance-{id}`, in the consumer
//! group `seckill`. Its loop, one step at a time:
//!
//! 1. After a start or a Redis error: its own pending entries (XREADGROUP
//!    from id `0` onwards), i.e. entries it read before and did not acknowledge.
//! 2. Every half claim time: XAUTOCLAIM the group's entries idle for longer
//!    than the claim time (`--claim-idle`, 5 s by default), whoever read them:
//!    a dead instance's unacknowledged entries come back this way.
//! 3. Otherwise: new entries (XREADGROUP `>`), blocking up to 500 ms.
//!
//! Each entry is written in one transaction (skip if an order with its id
//! exists; decrement `WHERE stock > 0`; insert), then acknowledged. A
//! database failure leaves the entry pending and the consumer retries it.
//! An entry that can never be written (malformed, voucher gone, no stock in
//! the database, a second order of the user) is logged, counted in
//! `seckill_reserve_entries_total{outcome="dropped"}` and acknowledged.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{FromRedisValue, Value};
use redlatch::RedisConnection;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, DbError, Order};
use crate::metrics;
use crate::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM};

/// How a consumer runs.
#[derive(Clone, Debug)]
pub struct ConsumerSettings {
    /// The consumer's name in the group: `instance-{id}`.
    pub consumer: String,
    /// Pending entries idle this long are taken over from whoever read them.
    pub claim_idle: Duration,
    /// Entries per read.
    pub batch: usize,
    /// How long a read waits for new entries.
    pub block: Duration,
}

impl ConsumerSettings {
    /// The settings of instance `instance`, with `claim_idle`.
    pub fn for_instance(instance: u16, claim_idle: Duration) -> ConsumerSettings {
        ConsumerSettings {
            consumer: format!("instance-{instance}"),
            claim_idle,
            batch: 100,
            block: Duration::from_millis(500),
        }
    }

    fn claim_every(&self) -> Duration {
        (self.claim_idle / 2).clamp(Duration::from_millis(50), Duration::from_secs(5))
    }
}

/// What became of one stream entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persisted {
    /// Written now.
    Written,
    /// An order with this id was already there (written by another consumer,
    /// or by this one before a crash): nothing to do.
    AlreadyThere,
    /// Cannot be written; acknowledged and dropped (see the module docs).
    Dropped,
}

impl Persisted {
    fn label(self) -> &'static str {
        match self {
            Persisted::Written => "written",
            Persisted::AlreadyThere => "already_there",
            Persisted::Dropped => "dropped",
        }
    }
}

/// Creates the stream and the consumer group if missing (XGROUP CREATE
/// MKSTREAM, from id 0 so entries added before the group are not skipped).
///
/// # Errors
/// Redis failures other than "the group exists".
pub async fn ensure_group(conn: &mut RedisConnection) -> redis::RedisResult<()> {
    let created: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match created {
        Err(error) if error.code() == Some("BUSYGROUP") => Ok(()),
        other => other,
    }
}

/// Writes one accepted order to the database, idempotently.
///
/// # Errors
/// Database failures that may pass (the entry stays pending and is retried).
pub async fn persist(db: &Db, order: &Order) -> Result<Persisted, DbError> {
    let mut tx = db.begin_write().await?;
    if tx.order_exists(order.id).await? {
        return Ok(Persisted::AlreadyThere);
    }
    if !tx.decrement_if_left(order.voucher_id).await? {
        tracing::error!(
            order_id = order.id,
            voucher_id = order.voucher_id,
            "seckill: reserved order has no stock left in the database (Redis stock set wrong?); dropped"
        );
        return Ok(Persisted::Dropped);
    }
    match tx.insert_order(order).await {
        Ok(()) => {}
        Err(DbError::Unique(detail)) => {
            // Dropping the transaction rolls the decrement back. Either a
            // concurrent consumer wrote this very order (primary key), or the
            // user already had one (Redis lost the buyers set).
            drop(tx);
            return Ok(if db.has_order_id(order.id).await? {
                Persisted::AlreadyThere
            } else {
                tracing::error!(order_id = order.id, user_id = order.user_id, %detail,
                    "seckill: reserved order duplicates the user's order; dropped");
                Persisted::Dropped
            });
        }
        Err(other) => return Err(other),
    }
    tx.commit().await?;
    Ok(Persisted::Written)
}

/// Runs the consumer until `shutdown` is cancelled. Finishes the batch in
/// hand (its entries are acknowledged) before returning.
///
/// `conn` must be a connection of the consumer's own, whose response
/// timeout is longer than `settings.block`: a blocking XREADGROUP would hold
/// up every other command queued behind it on a shared one.
pub async fn run(
    db: Db,
    conn: RedisConnection,
    settings: ConsumerSettings,
    shutdown: CancellationToken,
) {
    let mut consumer = Consumer {
        db,
        conn,
        settings,
        read_own_pending: true,
        own_pending_cursor: "0".to_owned(),
        next_claim: Instant::now(),
        claim_cursor: "0-0".to_owned(),
    };
    let mut backoff = Duration::from_millis(50);
    while !shutdown.is_cancelled() {
        // Only waiting on Redis is cut short by a shutdown: entries it may
        // have handed us meanwhile stay pending and are claimed later. A
        // batch in hand is written and acknowledged first.
        let fetched = tokio::select! {
            _ = shutdown.cancelled() => break,
            fetched = consumer.fetch() => fetched,
        };
        let outcome = match fetched {
            Ok((mut conn, entries)) => consumer.handle(&mut conn, entries).await,
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(error) => {
                tracing::warn!(%error, "seckill: reserve consumer step failed; retrying");
                if let StepError::Redis(_) = error {
                    // Replies may have been lost: re-read what we were given.
                    consumer.read_own_pending = true;
                    consumer.own_pending_cursor = "0".to_owned();
                }
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// The consumer's state between steps.
struct Consumer {
    db: Db,
    conn: RedisConnection,
    settings: ConsumerSettings,
    read_own_pending: bool,
    /// Where the pass over our own pending entries has got to.
    own_pending_cursor: String,
    next_claim: Instant,
    claim_cursor: String,
}

/// Why a step failed: Redis (re-read our pending entries once it is back)
/// or the database (the entries stay pending and are claimed again later).
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error(transparent)]
    Database(#[from] DbError),
}

impl Consumer {
    fn connection(&self) -> RedisConnection {
        self.conn.clone()
    }

    /// The next entries to write: own pending ones, claimed ones, or new
    /// ones (possibly none), with the connection to acknowledge them on.
    async fn fetch(&mut self) -> Result<(RedisConnection, Vec<StreamId>), StepError> {
        let mut conn = self.connection();
        if self.read_own_pending {
            let cursor = self.own_pending_cursor.clone();
            let entries = self.read(&mut conn, &cursor, None).await?;
            match entries.last() {
                // Walk on, so an entry that keeps failing cannot hold us here.
                Some(last) => self.own_pending_cursor = last.id.clone(),
                None => {
                    self.read_own_pending = false;
                    self.own_pending_cursor = "0".to_owned();
                }
            }
            return Ok((conn, entries));
        }
        if Instant::now() >= self.next_claim {
            let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                .arg(ORDERS_STREAM)
                .arg(CONSUMER_GROUP)
                .arg(&self.settings.consumer)
                .arg(self.settings.claim_idle.as_millis() as u64)
                .arg(&self.claim_cursor)
                .arg("COUNT")
                .arg(self.settings.batch)
                .query_async(&mut conn)
                .await?;
            if !reply.claimed.is_empty() {
                metrics::reserve_claimed(&self.settings.consumer, reply.claimed.len());
                tracing::info!(
                    claimed = reply.claimed.len(),
                    consumer = %self.settings.consumer,
                    "seckill: took over idle pending orders"
                );
            }
            self.claim_cursor = reply.next_stream_id;
            if self.claim_cursor == "0-0" {
                self.next_claim = Instant::now() + self.settings.claim_every();
            }
            return Ok((conn, reply.claimed));
        }
        let entries = self.read(&mut conn, ">", Some(self.settings.block)).await?;
        Ok((conn, entries))
    }

    /// XREADGROUP from `from` (`0`: own pending, `>`: new).
    async fn read(
        &self,
        conn: &mut RedisConnection,
        from: &str,
        block: Option<Duration>,
    ) -> Result<Vec<StreamId>, StepError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(CONSUMER_GROUP)
            .arg(&self.settings.consumer)
            .arg("COUNT")
            .arg(self.settings.batch);
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis() as u64);
        }
        cmd.arg("STREAMS").arg(ORDERS_STREAM).arg(from);
        let reply: Option<StreamReadReply> = cmd.query_async(conn).await?;
        Ok(reply
            .map(|reply| reply.keys.into_iter().flat_map(|key| key.ids).collect())
            .unwrap_or_default())
    }

    /// Persists each entry and acknowledges those done; entries the database
    /// refused stay pending, and the first such failure is returned.
    async fn handle(
        &mut self,
        conn: &mut RedisConnection,
        entries: Vec<StreamId>,
    ) -> Result<(), StepError> {
        let mut done = Vec::with_capacity(entries.len());
        let mut failure = None;
        for entry in entries {
            let outcome = match order_of_entry(&entry) {
                Some(order) => persist(&self.db, &order).await,
                None => {
                    tracing::error!(entry = %entry.id, "seckill: malformed order entry; dropped");
                    Ok(Persisted::Dropped)
                }
            };
            match outcome {
                Ok(persisted) => {
                    metrics::reserve_entry(&self.settings.consumer, persisted.label());
                    done.push(entry.id);
                }
                Err(error) => {
                    tracing::warn!(entry = %entry.id, %error, "seckill: order entry not written; it stays pending");
                    failure.get_or_insert(error);
                }
            }
        }
        if !done.is_empty() {
            let _: i64 = redis::cmd("XACK")
                .arg(ORDERS_STREAM)
                .arg(CONSUMER_GROUP)
                .arg(&done)
                .query_async(conn)
                .await?;
        }
        match failure {
            Some(error) => Err(StepError::Database(error)),
            None => Ok(()),
        }
    }
}

/// The order in a stream entry, if its fields are all there and numeric.
fn order_of_entry(entry: &StreamId) -> Option<Order> {
    let field = |name: &str| -> Option<i64> {
        let value: &Value = entry.map.get(name)?;
        let text = String::from_redis_value(value.clone()).ok()?;
        text.parse().ok()
    };
    Some(Order {
        id: field("order_id")?,
        user_id: field("user_id")?,
        voucher_id: field("voucher_id")?,
        created_at: Utc.timestamp_millis_opt(field("created_at")?).single()?,
    })
}

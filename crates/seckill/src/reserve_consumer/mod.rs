//! The `reserve` strategy's second half: from the stream `{seckill}:orders` to
//! the database, with no accepted order lost when an instance dies, and none
//! silently dropped.
//!
//! Each instance runs one consumer, named `instance-{id}`, in the consumer
//! group `seckill`. Its loop, one step at a time:
//!
//! 1. After a start, a Redis error or a database failure: its own pending
//!    entries (XREADGROUP from id `0` onwards), i.e. entries it read before
//!    and did not acknowledge.
//! 2. Every half claim time: XAUTOCLAIM the group's entries idle for longer
//!    than the claim time (`--claim-idle`, 5 s by default), whoever read them:
//!    a dead instance's unacknowledged entries come back this way.
//! 3. Otherwise: new entries (XREADGROUP `>`), blocking up to 500 ms.
//!
//! Every `--trim-every` (10 s) it also removes acknowledged entries from the
//! stream ([`trim`]).
//!
//! Each entry is written in one transaction (skip if an order with its id
//! exists; decrement `WHERE stock > 0`; insert), then acknowledged.
//!
//! # Failures
//!
//! - **The database fails** (down, timeout, deadlock, any error): the entry
//!   stays pending. The consumer finishes the batch, acknowledges what it
//!   wrote, sleeps a backoff (`--consumer-backoff`, 500 ms by default,
//!   doubling after each failed step up to 10 s, back to the start after a
//!   good one), then re-reads its own pending entries, which retries them.
//!   New entries wait during the sleep: a batch, not an entry, backs off. An
//!   entry whose write fails once it has been delivered
//!   `--consumer-max-tries` times (10; XPENDING's delivery count, so a
//!   takeover after a crash counts as a delivery) goes to the dead-letter
//!   stream with reason `max_tries`. With the defaults that is after about
//!   a minute of failures (0.5 + 1 + 2 + 4 + 8 + 4 × 10 s); longer outages
//!   dead-letter entries, which `POST /admin/dead-letters/replay` puts back.
//! - **The entry can never be written**: to the dead-letter stream at once,
//!   with reason `malformed` (a field missing or not an integer),
//!   `voucher_gone` (no such voucher in the database), `no_stock` (no stock
//!   left in the database: the Redis stock was set wrong) or
//!   `duplicate_user` (the user already has an order of the voucher: Redis
//!   lost its buyers set) or `id_collision` (another order has its id:
//!   Redis lost the day's id counter, and the id was drawn again; its unit
//!   goes back on the Redis stock, once, and the user may order again).
//! - **Redis fails**: the step is retried after 50 ms, doubling up to 2 s;
//!   replies may have been lost, so its own pending entries are re-read.
//! - **Redis lost the group** (a restart without persistence, a failover to
//!   a replica that never had it: `NOGROUP`): the consumer creates the
//!   stream and the group again at once, from id 0, so orders accepted
//!   since are read; counted in `seckill_reserve_group_created_total`.
//! - **Steps keep failing** for 2 s or more: `/health/ready` answers 503
//!   naming `consumer` ([`health`]) until a step goes through.
//!
//! A dead-lettered entry ([`dead_letter`]) is acknowledged on the order
//! stream and counted in `seckill_reserve_dead_letters_total{reason}`; it
//! keeps its fields, plus `reason`, `tries`, `source_id` and `error`.

pub mod dead_letter;
pub mod health;
pub mod trim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use redis::{FromRedisValue, Value};
use redlatch::RedisConnection;
use tokio_util::sync::CancellationToken;

use crate::db::{Db, DbError, Order};
use crate::lifecycle::redis_stock;
use crate::metrics;
use crate::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM, buyers_key};
use dead_letter::{DeadReason, Moved};
use health::ConsumerHealth;

/// The longest backoff after database failures.
const MAX_DATABASE_BACKOFF: Duration = Duration::from_secs(10);

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
    /// An entry whose write fails once delivered this many times is
    /// dead-lettered (`max_tries`). At least 1.
    pub max_tries: u32,
    /// The first sleep after a step with database failures; doubles after
    /// each further one, up to 10 s.
    pub backoff: Duration,
    /// How often acknowledged entries are trimmed from the stream.
    pub trim_every: Duration,
    /// A fault for tests, zero otherwise: sleep this long after each entry
    /// written, before the next one of the batch (a slow database).
    pub write_delay: Duration,
}

impl ConsumerSettings {
    /// The settings of instance `instance`, with `claim_idle`, and defaults
    /// for the rest (10 tries, 500 ms backoff, trimming every 10 s).
    pub fn for_instance(instance: u16, claim_idle: Duration) -> ConsumerSettings {
        ConsumerSettings {
            consumer: format!("instance-{instance}"),
            claim_idle,
            batch: 100,
            block: Duration::from_millis(500),
            max_tries: 10,
            backoff: Duration::from_millis(500),
            trim_every: Duration::from_secs(10),
            write_delay: Duration::ZERO,
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
    /// Can never be written: for the dead-letter stream.
    Unwritable(DeadReason),
}

impl Persisted {
    fn label(self) -> &'static str {
        match self {
            Persisted::Written => "written",
            Persisted::AlreadyThere => "already_there",
            Persisted::Unwritable(_) => "dead_lettered",
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
    if let Some(owner) = tx.order_owner(order.id).await? {
        return Ok(same_or_collision(order, owner));
    }
    if !tx.decrement_if_left(order.voucher_id).await? {
        drop(tx);
        return Ok(Persisted::Unwritable(
            match db.stock(order.voucher_id).await? {
                None => DeadReason::VoucherGone,
                Some(_) => DeadReason::NoStock,
            },
        ));
    }
    match tx.insert_order(order).await {
        Ok(()) => {}
        Err(DbError::Unique(_)) => {
            // Dropping the transaction rolls the decrement back. Either a
            // concurrent consumer wrote this very order (primary key), or the
            // user already had one (Redis lost the buyers set).
            drop(tx);
            return Ok(match db.order_owner(order.id).await? {
                Some(owner) => same_or_collision(order, owner),
                None => Persisted::Unwritable(DeadReason::DuplicateUser),
            });
        }
        Err(other) => return Err(other),
    }
    tx.commit().await?;
    Ok(Persisted::Written)
}

/// An order with `order`'s id is there, of (user, voucher) `owner`: this
/// very order written before, or another one that drew the same id (Redis
/// lost the day's id counter: a restart without persistence, a failover).
fn same_or_collision(order: &Order, owner: (i64, i64)) -> Persisted {
    if owner == (order.user_id, order.voucher_id) {
        Persisted::AlreadyThere
    } else {
        Persisted::Unwritable(DeadReason::IdCollision)
    }
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
    health: Arc<ConsumerHealth>,
    shutdown: CancellationToken,
) {
    let mut consumer = Consumer {
        db,
        conn,
        read_own_pending: true,
        own_pending_cursor: "0".to_owned(),
        next_claim: Instant::now(),
        claim_cursor: "0-0".to_owned(),
        next_trim: Instant::now() + settings.trim_every,
        settings,
    };
    let redis_backoff_start = Duration::from_millis(50);
    let mut redis_backoff = redis_backoff_start;
    let mut database_backoff = consumer.settings.backoff;
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
        consumer.trim_when_due().await;
        match &outcome {
            Ok(()) => health.step_succeeded(),
            Err(error) => health.step_failed(&error.to_string()),
        }
        let sleep = match outcome {
            Ok(()) => {
                redis_backoff = redis_backoff_start;
                database_backoff = consumer.settings.backoff;
                continue;
            }
            Err(StepError::Redis(error)) if error.code() == Some("NOGROUP") => {
                // Redis lost its data: without the group every order
                // accepted from now on would sit unread in the stream.
                match ensure_group(&mut consumer.connection()).await {
                    Ok(()) => {
                        metrics::reserve_group_created(&consumer.settings.consumer);
                        tracing::warn!(consumer = %consumer.settings.consumer,
                            "seckill: the order stream's consumer group was gone (Redis lost its data?); created it again");
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "seckill: could not create the consumer group again; retrying");
                        let sleep = redis_backoff;
                        redis_backoff = (redis_backoff * 2).min(Duration::from_secs(2));
                        sleep
                    }
                }
            }
            Err(StepError::Redis(error)) => {
                tracing::warn!(%error, "seckill: reserve consumer step failed on Redis; retrying");
                let sleep = redis_backoff;
                redis_backoff = (redis_backoff * 2).min(Duration::from_secs(2));
                sleep
            }
            Err(StepError::Database(error)) => {
                tracing::warn!(%error, backoff = ?database_backoff,
                    "seckill: reserve consumer could not write some entries; retrying them after the backoff");
                let sleep = database_backoff;
                database_backoff = (database_backoff * 2).min(MAX_DATABASE_BACKOFF);
                sleep
            }
        };
        // Either way, what we hold and did not acknowledge is read again:
        // replies lost with Redis, or entries the database refused.
        consumer.read_own_pending = true;
        consumer.own_pending_cursor = "0".to_owned();
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(sleep) => {}
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
    next_trim: Instant,
}

/// Why a step failed: Redis (re-read our pending entries once it is back)
/// or the database (the entries stay pending and are retried after a
/// backoff).
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

    /// Persists each entry, acknowledges those written, dead-letters those
    /// that can never be written and those out of tries; the others stay
    /// pending, and the first database failure among them is returned.
    async fn handle(
        &mut self,
        conn: &mut RedisConnection,
        entries: Vec<StreamId>,
    ) -> Result<(), StepError> {
        let mut done = Vec::with_capacity(entries.len());
        let mut failure = None;
        for entry in entries {
            let order = order_of_entry(&entry);
            let outcome = match &order {
                Some(order) => {
                    let outcome = persist(&self.db, order).await;
                    if !self.settings.write_delay.is_zero() {
                        tokio::time::sleep(self.settings.write_delay).await;
                    }
                    outcome
                }
                None => Ok(Persisted::Unwritable(DeadReason::Malformed)),
            };
            match outcome {
                Ok(Persisted::Unwritable(reason)) => {
                    if let (DeadReason::IdCollision, Some(order)) = (reason, &order) {
                        // First, so a failure leaves the entry pending and
                        // this runs again (it is idempotent).
                        self.release_reservation(conn, order).await?;
                    }
                    self.dead_letter(conn, &entry.id, reason, 0, describe(reason))
                        .await?;
                }
                Ok(persisted) => {
                    metrics::reserve_entry(&self.settings.consumer, persisted.label());
                    done.push(entry.id);
                }
                Err(error) => {
                    let moved = self
                        .dead_letter(
                            conn,
                            &entry.id,
                            DeadReason::MaxTries,
                            self.settings.max_tries.max(1),
                            &error.to_string(),
                        )
                        .await?;
                    if let Moved::NotYet { tries } = moved {
                        metrics::reserve_entry(&self.settings.consumer, "failed");
                        tracing::warn!(entry = %entry.id, tries, %error,
                            "seckill: order entry not written; it stays pending and is retried");
                        failure.get_or_insert(error);
                    }
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

    /// Moves entry `id` to the dead-letter stream if delivered at least
    /// `min_tries` times, logging and counting it when moved.
    async fn dead_letter(
        &self,
        conn: &mut RedisConnection,
        id: &str,
        reason: DeadReason,
        min_tries: u32,
        error: &str,
    ) -> Result<Moved, StepError> {
        let moved =
            dead_letter::move_entry(conn, &self.settings.consumer, id, reason, min_tries, error)
                .await?;
        match moved {
            Moved::Dead { tries } => {
                metrics::reserve_entry(&self.settings.consumer, "dead_lettered");
                metrics::reserve_dead_letter(reason.label());
                tracing::error!(entry = %id, reason = reason.label(), tries, %error,
                    "seckill: order entry moved to the dead-letter stream");
            }
            Moved::NotOurs => {
                tracing::info!(entry = %id, "seckill: order entry taken over by another consumer meanwhile; left to it");
            }
            Moved::NotYet { .. } => {}
        }
        Ok(moved)
    }

    /// Undoes in Redis the reservation of an entry that can never be
    /// written under its id: its unit goes back on sale (once however often
    /// it is replayed),
    /// and its user may click again unless they have an order after all.
    async fn release_reservation(
        &self,
        conn: &mut RedisConnection,
        order: &Order,
    ) -> Result<(), StepError> {
        redis_stock::give_back_collided(conn, order.voucher_id, order.id, order.user_id).await?;
        if !self.db.has_order(order.voucher_id, order.user_id).await? {
            let _: i64 = redis::cmd("SREM")
                .arg(buyers_key(order.voucher_id))
                .arg(order.user_id)
                .query_async(conn)
                .await?;
        }
        Ok(())
    }

    /// Trims acknowledged entries when due; a failure is logged and tried
    /// again at the next turn.
    async fn trim_when_due(&mut self) {
        if Instant::now() < self.next_trim {
            return;
        }
        self.next_trim = Instant::now() + self.settings.trim_every;
        match trim::trim(&mut self.connection()).await {
            Ok((trimmed, minid)) => {
                if trimmed > 0 {
                    metrics::reserve_trimmed(&self.settings.consumer, trimmed);
                    tracing::debug!(trimmed, %minid, "seckill: trimmed acknowledged order entries");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "seckill: could not trim the order stream");
            }
        }
    }
}

/// The `error` field of an entry that can never be written.
fn describe(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::Malformed => {
            "a field of order_id, user_id, voucher_id, created_at is missing or not an integer"
        }
        DeadReason::VoucherGone => "no voucher with this id in the database",
        DeadReason::NoStock => {
            "the voucher has no stock left in the database (Redis stock set wrong?)"
        }
        DeadReason::DuplicateUser => {
            "the user already has an order of this voucher (Redis lost its buyers?)"
        }
        DeadReason::MaxTries => "the database refused it too many times",
        DeadReason::IdCollision => {
            "another order has this id (Redis lost its id counter?); its unit went back on sale"
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

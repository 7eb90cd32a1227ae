//! The asynchronous order: reserve in Redis, persist later.
//!
//! # Design
//!
//! The request path never touches the database (the sale window comes from
//! the per-instance cache):
//!
//! 1. One script, `reserve.lua`, atomically: stock left in
//!    `{seckill}:stock:VOUCHER`? user not in `{seckill}:buyers:VOUCHER`? then
//!    draw the order id (the id worker's INCR, inside the script), DECR the
//!    stock, SADD the user, and XADD the order to the stream
//!    `{seckill}:orders`. Redis runs scripts one at a time, so no lock is
//!    needed, and a click on a sold-out voucher costs one call and no id.
//! 2. 202 with the order id and status `pending`, at once: accepted for
//!    writing. `GET /orders/{id}` finds it once the consumer has written it.
//!
//! Every instance runs a consumer ([`reserve_consumer`](crate::reserve_consumer))
//! in the consumer group `seckill`, named `instance-{id}`: it reads new
//! entries with XREADGROUP, writes each order to the database (insert if no
//! order with that id exists, with the conditional decrement, in one
//! transaction), then XACKs. An entry read by an instance that dies before its
//! XACK stays in the group's pending list; a surviving instance takes it over
//! with XAUTOCLAIM once it has been idle for the claim time (5 s by default)
//! and writes it, so an accepted order is never lost while Redis keeps its
//! data. Writing twice is harmless: the order id is the primary key.
//!
//! The Redis stock is set when a voucher is created through a `reserve`
//! instance, and otherwise lazily from the database when missing
//! (`reserve_init.lua`, SET NX semantics, with the users who already have an
//! order). The database stock catches up with the Redis stock as the consumer
//! works: `GET /vouchers/{id}` shows the database's.
//!
//! Limits: Redis is the source of truth between the reservation and the
//! consumer's write. If Redis loses data (restart without persistence,
//! failover before replication), reservations not yet written are lost, and
//! the lazily re-initialised stock is the database's. Acknowledged entries
//! are trimmed from the stream by the consumers; entries that cannot be
//! written go to a dead-letter stream (see the consumer's docs).

use futures_util::future::BoxFuture;
use redis::Script;
use std::sync::LazyLock;

use chrono::Utc;

use super::contract::{Click, OrderContext, OrderError, Placed, Strategy};
use crate::id_worker;

/// The stream of accepted orders.
pub const ORDERS_STREAM: &str = "{seckill}:orders";
/// The consumer group that writes them to the database.
pub const CONSUMER_GROUP: &str = "seckill";

/// The Redis stock key of a voucher. Every key of the shop carries the hash
/// tag `{seckill}`: the reservation script touches a voucher's stock, its
/// buyers and the order stream at once, which a Redis Cluster allows only
/// within one hash slot.
pub fn stock_key(voucher_id: i64) -> String {
    format!("{{seckill}}:stock:{voucher_id}")
}

/// The Redis set of users who reserved a voucher.
pub fn buyers_key(voucher_id: i64) -> String {
    format!("{{seckill}}:buyers:{voucher_id}")
}

static RESERVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("reserve.lua")));
static INIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("reserve_init.lua")));

/// Reserve in Redis, answer at once, persist through the stream.
pub struct Reserve;

impl Strategy for Reserve {
    fn order<'a>(&'a self, ctx: &'a OrderContext, click: Click) -> Placed<'a> {
        Box::pin(async move {
            let now = Utc::now();
            let seconds = id_worker::seconds_since_epoch(now)?;
            let mut conn = ctx.redis.clone();
            let mut initialised = false;
            loop {
                let (reply, sequence): (i64, u64) = RESERVE
                    .key(stock_key(click.voucher_id))
                    .key(buyers_key(click.voucher_id))
                    .key(ORDERS_STREAM)
                    .key(id_worker::day_key(now))
                    .arg(click.user_id)
                    .arg(seconds)
                    .arg(click.voucher_id)
                    .arg(now.timestamp_millis())
                    .invoke_async(&mut conn)
                    .await?;
                match reply {
                    0 => return Ok(id_worker::compose(seconds, sequence)?),
                    1 => return Err(OrderError::SoldOut),
                    2 => return Err(OrderError::AlreadyOrdered),
                    -1 if !initialised => {
                        initialise_lazily(ctx, click.voucher_id).await?;
                        initialised = true;
                    }
                    -2 => {
                        return Err(id_worker::IdError::OutOfRange(format!(
                            "the day's order counter reached {sequence}, past 2^32"
                        ))
                        .into());
                    }
                    other => {
                        return Err(OrderError::Redis(format!(
                            "reserve.lua answered {other} for voucher {}",
                            click.voucher_id
                        )));
                    }
                }
            }
        })
    }

    fn accepts_for_writing(&self) -> bool {
        true
    }

    fn voucher_created<'a>(
        &'a self,
        ctx: &'a OrderContext,
        voucher_id: i64,
        stock: i64,
    ) -> BoxFuture<'a, Result<(), OrderError>> {
        Box::pin(async move {
            let mut conn = ctx.redis.clone();
            let _: i64 = INIT
                .key(stock_key(voucher_id))
                .key(buyers_key(voucher_id))
                .arg("create")
                .arg(stock)
                .invoke_async(&mut conn)
                .await?;
            Ok(())
        })
    }
}

/// Sets the Redis stock and buyers from the database, unless another request
/// did meanwhile.
async fn initialise_lazily(ctx: &OrderContext, voucher_id: i64) -> Result<(), OrderError> {
    let stock = ctx
        .db
        .stock(voucher_id)
        .await?
        .ok_or(OrderError::NotFound)?;
    let buyers = ctx.db.buyers(voucher_id).await?;
    let mut conn = ctx.redis.clone();
    let mut script = INIT.key(stock_key(voucher_id));
    script.key(buyers_key(voucher_id)).arg("lazy").arg(stock);
    for buyer in buyers {
        script.arg(buyer);
    }
    let written: i64 = script.invoke_async(&mut conn).await?;
    tracing::info!(
        voucher_id,
        stock,
        written = written == 1,
        "seckill: reserve stock initialised from the database"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id_worker::compose;

    /// Runs `reserve.lua` for one click at `seconds` with the day's counter
    /// at `counter`; returns its reply and the order id it queued, if any.
    fn reserve_at(
        redis: &testkit::RedisServer,
        stock: i64,
        seconds: i64,
        counter: u64,
    ) -> ((i64, u64), Option<String>) {
        let mut conn = redis.conn();
        let day = "{seckill}:icr:order:20261126";
        let _: () = redis::pipe()
            .cmd("FLUSHALL")
            .ignore()
            .cmd("SET")
            .arg(stock_key(7))
            .arg(stock)
            .ignore()
            .cmd("SET")
            .arg(day)
            .arg(counter)
            .ignore()
            .query(&mut conn)
            .expect("setup");
        let reply: (i64, u64) = RESERVE
            .key(stock_key(7))
            .key(buyers_key(7))
            .key(ORDERS_STREAM)
            .key(day)
            .arg(42)
            .arg(seconds)
            .arg(7)
            .arg(0)
            .invoke(&mut conn)
            .expect("reserve.lua");
        let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(ORDERS_STREAM)
            .arg("-")
            .arg("+")
            .query(&mut conn)
            .expect("XRANGE");
        let queued = entries
            .ids
            .first()
            .and_then(|entry| entry.get::<String>("order_id"));
        (reply, queued)
    }

    #[test]
    fn the_queued_order_id_is_the_answered_one_to_the_last_bit() {
        let redis = testkit::RedisServer::start().expect("redis-server");
        let top_seconds = (1i64 << 31) - 1;
        for (seconds, counter) in [
            (0, 0),
            (1, 0),
            (999_999, 41),
            (86_400 * 1_000, 123_456),
            (top_seconds, (1u64 << 32) - 2),
        ] {
            let ((code, sequence), queued) = reserve_at(&redis, 1, seconds, counter);
            assert_eq!(code, 0, "seconds {seconds}");
            assert_eq!(sequence, counter + 1);
            let id = compose(seconds, sequence).expect("fits");
            assert_eq!(
                queued,
                Some(id.to_string()),
                "seconds {seconds}, sequence {sequence}"
            );
        }
    }

    #[test]
    fn a_counter_past_its_bits_writes_nothing() {
        let redis = testkit::RedisServer::start().expect("redis-server");
        let ((code, _), queued) = reserve_at(&redis, 1, 5, (1u64 << 32) - 1);
        assert_eq!(code, -2);
        assert_eq!(queued, None);
        let stock: i64 = redis::cmd("GET")
            .arg(stock_key(7))
            .query(&mut redis.conn())
            .expect("GET");
        assert_eq!(stock, 1, "the stock is untouched");
    }

    #[test]
    fn a_sold_out_click_draws_no_id() {
        let redis = testkit::RedisServer::start().expect("redis-server");
        let ((code, _), queued) = reserve_at(&redis, 0, 5, 10);
        assert_eq!((code, queued), (1, None));
        let counter: u64 = redis::cmd("GET")
            .arg("{seckill}:icr:order:20261126")
            .query(&mut redis.conn())
            .expect("GET");
        assert_eq!(counter, 10, "no id drawn for a sold-out click");
    }
}

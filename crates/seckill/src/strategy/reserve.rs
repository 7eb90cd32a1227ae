//! The asynchronous order: reserve in Redis, persist later.
//!
//! # Design
//!
//! The request path never touches the database (the sale window comes from
//! the per-instance cache):
//!
//! 1. An order id from the id worker (one INCR).
//! 2. One script, `reserve.lua`, atomically: stock left in
//!    `{seckill}:stock:VOUCHER`? user not in `{seckill}:buyers:VOUCHER`? then
//!    DECR the stock, SADD the user, and XADD the order to the stream
//!    `{seckill}:orders`. Redis runs scripts one at a time, so no lock is needed.
//! 3. 201 with the order id, at once.
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
//! the lazily re-initialised stock is the database's. The stream is never
//! trimmed.

use futures_util::future::BoxFuture;
use redis::Script;
use std::sync::LazyLock;

use super::{OrderContext, OrderError, OrderId, Strategy};

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
    fn order<'a>(
        &'a self,
        ctx: &'a OrderContext,
        voucher_id: i64,
        user_id: i64,
    ) -> BoxFuture<'a, Result<OrderId, OrderError>> {
        Box::pin(async move {
            ctx.check_sale_open(voucher_id).await?;
            let order = ctx.new_order(voucher_id, user_id).await?;
            let mut conn = ctx.redis.clone();
            let mut initialised = false;
            loop {
                let reply: i64 = RESERVE
                    .key(stock_key(voucher_id))
                    .key(buyers_key(voucher_id))
                    .key(ORDERS_STREAM)
                    .arg(user_id)
                    .arg(order.id)
                    .arg(voucher_id)
                    .arg(order.created_at.timestamp_millis())
                    .invoke_async(&mut conn)
                    .await?;
                match reply {
                    0 => return Ok(order.id),
                    1 => return Err(OrderError::SoldOut),
                    2 => return Err(OrderError::AlreadyOrdered),
                    -1 if !initialised => {
                        initialise_lazily(ctx, voucher_id).await?;
                        initialised = true;
                    }
                    other => {
                        return Err(OrderError::Redis(format!(
                            "reserve.lua answered {other} for voucher {voucher_id}"
                        )));
                    }
                }
            }
        })
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

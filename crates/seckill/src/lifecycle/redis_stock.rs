//! The Redis half of giving a unit back: the `reserve` strategy's stock.

use std::sync::LazyLock;

use redis::Script;

use crate::strategy::reserve::stock_key;

static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("give_back.lua")));

/// The set of orders whose unit is back in a voucher's Redis stock.
pub fn returned_key(voucher_id: i64) -> String {
    format!("{{seckill}}:returned:{voucher_id}")
}

/// What [`give_back`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GivenBack {
    /// The Redis stock grew by one now.
    Now,
    /// It had grown for this order before (a retry after a crash).
    Before,
    /// The voucher has no Redis stock: nothing to do, it will be read from
    /// the database.
    NoRedisStock,
}

/// Adds the unit of ended order `order_id` back to `voucher_id`'s Redis
/// stock, at most once per order however often it is called.
///
/// # Errors
/// Redis failures (the sweeper calls it again later).
pub async fn give_back(
    conn: &mut redlatch::RedisConnection,
    voucher_id: i64,
    order_id: i64,
) -> redis::RedisResult<GivenBack> {
    give_back_once(conn, voucher_id, &order_id.to_string()).await
}

/// Adds back the unit of user `user_id`'s reservation that drew the id of
/// another order, `order_id` (dead-lettered `id_collision`): at most once,
/// however often its entry is replayed and dead-lettered again.
///
/// # Errors
/// Redis failures.
pub async fn give_back_collided(
    conn: &mut redlatch::RedisConnection,
    voucher_id: i64,
    order_id: i64,
    user_id: i64,
) -> redis::RedisResult<GivenBack> {
    // Not a bare number: never taken for the order that kept the id.
    give_back_once(conn, voucher_id, &format!("collided:{order_id}:{user_id}")).await
}

async fn give_back_once(
    conn: &mut redlatch::RedisConnection,
    voucher_id: i64,
    member: &str,
) -> redis::RedisResult<GivenBack> {
    let reply: i64 = GIVE_BACK
        .key(stock_key(voucher_id))
        .key(returned_key(voucher_id))
        .arg(member)
        .invoke_async(conn)
        .await?;
    Ok(match reply {
        1 => GivenBack::Now,
        0 => GivenBack::Before,
        _ => GivenBack::NoRedisStock,
    })
}

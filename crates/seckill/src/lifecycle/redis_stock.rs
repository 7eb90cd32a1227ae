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
    let reply: i64 = GIVE_BACK
        .key(stock_key(voucher_id))
        .key(returned_key(voucher_id))
        .arg(order_id)
        .invoke_async(conn)
        .await?;
    Ok(match reply {
        1 => GivenBack::Now,
        0 => GivenBack::Before,
        _ => GivenBack::NoRedisStock,
    })
}

//! Trimming the order stream: acknowledged entries are removed.
//!
//! Every `--trim-every` each consumer runs `trim.lua`: XTRIM `MINID` to the
//! group's oldest pending entry (XPENDING summary), or, when nothing is
//! pending, to just past the group's last delivered entry (XINFO GROUPS).
//! Entries not yet delivered and entries still pending (their consumer may
//! die; another one claims them) always stay. Reading the group's state and
//! trimming happen in one script, so no delivery slips in between. Entries
//! acknowledged out of order above the oldest pending one stay until it is
//! acknowledged.

use std::sync::LazyLock;

use redis::Script;
use redlatch::RedisConnection;

use crate::strategy::reserve::{CONSUMER_GROUP, ORDERS_STREAM};

static TRIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("trim.lua")));

/// Removes the acknowledged head of the order stream; returns how many
/// entries went, and the `MINID` used (empty when the group is missing).
///
/// # Errors
/// Redis failures.
pub async fn trim(conn: &mut RedisConnection) -> redis::RedisResult<(u64, String)> {
    TRIM.key(ORDERS_STREAM)
        .arg(CONSUMER_GROUP)
        .invoke_async(conn)
        .await
}

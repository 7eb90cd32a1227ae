//! One script request on a client's connection, bounded by the client's
//! response timeout: what every primitive's typed calls send (`send` for a
//! script that changes data, `call` for one that only reads).

use std::sync::Arc;

use crate::engine::context::Core;
use crate::error::{Error, Result};
use crate::scripts::{Call, Invocation};
use crate::transport::bounded;

/// Sends one request of a script that changes data on the client's
/// connection, each send bounded by the response timeout (re-sent on a
/// cluster when a send fails on the way: [`crate::scripts::Call::run`]).
pub(crate) async fn send<T: redis::FromRedisValue>(
    core: &Arc<Core>,
    op: &'static str,
    request: Call,
) -> Result<T> {
    let mut conn = core.conn.clone();
    let limit = core.current_settings().response_timeout;
    request.run(&mut conn, op, limit).await
}

/// Runs one read-only script call on the client's connection, bounded by the response timeout.
pub(crate) async fn call<T: redis::FromRedisValue>(
    core: &Arc<Core>,
    op: &'static str,
    invocation: &Invocation,
) -> Result<T> {
    let mut conn = core.conn.clone();
    let limit = core.current_settings().response_timeout;
    bounded(op, limit, async {
        invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|error| Error::from_redis(op, error))
    })
    .await
}

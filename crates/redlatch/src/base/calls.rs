//! The typed calls of the scripts every lock kind that keeps its hold in a
//! lock hash field shares: re-enter, renew one hold.

use std::time::Duration;

use crate::base::request::Request;
use crate::error::{Error, Result};
use crate::transport::{Connection, bounded};

/// Adds one hold for an owner that holds the lock already. One round trip,
/// at most `limit`. Returns false when the owner no longer holds it.
pub(crate) async fn reenter(
    conn: &mut Connection,
    request: &Request,
    limit: Duration,
) -> Result<bool> {
    let mut call = crate::base::scripts::REENTER.call(conn);
    call.key(&request.keys.key)
        .arg(request.lease_ms)
        .arg(&*request.owner);
    let reply: i64 = call.run(conn, "reenter", limit).await?;
    match reply {
        -1 => Err(Error::WrongType {
            key: request.keys.key.to_string(),
        }),
        0 => Ok(false),
        count if count > 0 => Ok(true),
        other => Err(Error::Protocol {
            op: "reenter",
            detail: format!("{other}"),
        }),
    }
}

/// Extends one lock held by `request.owner` to `request.lease_ms` (the
/// renewal script with a single entry). One round trip, at most `limit`.
/// Returns false when the owner no longer holds it.
pub(crate) async fn renew_one(
    conn: &mut Connection,
    request: &Request,
    limit: Duration,
) -> Result<bool> {
    let call = async {
        crate::base::scripts::RENEW
            .key(&*request.keys.key)
            .arg(&*request.owner)
            .arg(request.lease_ms)
            .invoke_async::<Vec<i64>>(conn)
            .await
            .map_err(|error| Error::from_redis("renew", error))
    };
    let reply = bounded("renew", limit, call).await?;
    Ok(reply.first() == Some(&1))
}

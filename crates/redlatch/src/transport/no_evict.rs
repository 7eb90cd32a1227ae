//! `CLIENT NO-EVICT ON` (Redis and Valkey 7 and later): a server that
//! bounds its clients' memory (`maxmemory-clients`) closes the largest
//! clients first when the bound is passed. A lock client's connections are
//! small but must not be among them: a closed command connection fails the
//! renewals in flight, a closed watch connection leaves lost holds to the
//! renewals. The flag belongs to one connection and dies with it, so it is
//! sent on each connection the client opens, and again after a reconnection.

use redis::RedisError;
use redis::aio::ConnectionLike;

use crate::transport::capabilities::Support;

/// Asks the server not to evict the connection `conn` is (or, for a
/// multiplexed connection, now runs on). What the server answered.
pub(crate) async fn protect(conn: &mut impl ConnectionLike) -> Support {
    match redis::cmd("CLIENT")
        .arg("NO-EVICT")
        .arg("ON")
        .query_async::<()>(conn)
        .await
    {
        Ok(()) => Support::Available,
        Err(error) => judge(&error),
    }
}

/// An older server does not know the subcommand; a renamed or disabled
/// `CLIENT`, or an ACL, refuses it.
fn judge(error: &RedisError) -> Support {
    let detail = error.detail().unwrap_or_default().to_ascii_lowercase();
    match error.code() {
        Some("ERR") if detail.contains("unknown subcommand") || detail.contains("syntax") => {
            Support::Absent
        }
        Some(code) => Support::Denied(format!("{code} {}", error.detail().unwrap_or_default())),
        // No answer (a broken connection, a timeout): nothing learned.
        None => Support::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str, detail: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{code} {detail}\r\n").as_bytes()) {
            Ok(redis::Value::ServerError(error)) => error.into(),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn an_old_server_lacks_it_and_an_acl_denies_it() {
        let old = server_error("ERR", "unknown subcommand 'NO-EVICT'. Try CLIENT HELP.");
        assert_eq!(judge(&old), Support::Absent);
        let acl = server_error(
            "NOPERM",
            "this user has no permissions to run the 'client|no-evict' command",
        );
        assert!(matches!(judge(&acl), Support::Denied(why) if why.contains("NOPERM")));
        let renamed = server_error(
            "ERR",
            "unknown command 'CLIENT', with args beginning with: 'NO-EVICT'",
        );
        assert!(matches!(judge(&renamed), Support::Denied(_)));
    }
}

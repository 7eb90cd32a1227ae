//! Who waits for which lock now: the wait-for edges deadlock detection
//! writes, read back by SCAN (never KEYS).

use crate::client::Client;
use crate::client::scan::{escape_glob, keys_matching};
use crate::deadlock::{WAIT_KEY_PREFIX, Waiting, party_of_wait_key};
use crate::error::{Error, Result};
use crate::transport::bounded;

impl Client {
    /// Every wait-for edge under this client's key prefix: who waits for
    /// which lock now, sorted by party.
    ///
    /// Edges are written by clients with
    /// [deadlock detection](crate::ClientBuilder::deadlock_detection) on,
    /// while an acquire waits for a held lock, and deleted when the wait
    /// ends (or lapse within [`MAX_EDGE_LIFE`](crate::deadlock::MAX_EDGE_LIFE)
    /// of a waiter that died). An edge whose party already holds the lock
    /// it names is stale: its delete is on the way.
    ///
    /// Walks the keyspace with `SCAN ... MATCH redlatch_wait:* TYPE string`
    /// (on a cluster, every master), then reads each edge found: one round
    /// trip per 1000 keys scanned plus one per edge. An edge that lapses
    /// during the walk is left out; a key of the edges' layout that holds
    /// no lock name of this prefix (another type, no party, a value of
    /// another prefix, the prefix alone, bytes that are not UTF-8) is
    /// skipped.
    ///
    /// # Errors
    /// Connection errors; [`Error::ClusterNode`] when a client connected to
    /// one server finds a Redis Cluster node (it would see only that node's
    /// edges).
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(client: redlatch::Client) -> redlatch::Result<()> {
    /// for waiting in client.waits().await? {
    ///     println!("{} waits for {}", waiting.party, waiting.lock);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn waits(&self) -> Result<Vec<Waiting>> {
        let settings = self.core.current_settings();
        let prefix = settings.key_prefix.as_str();
        let pattern = format!("{}{WAIT_KEY_PREFIX}*", escape_glob(prefix));
        let mut conn = self.core.conn.clone();
        let keys = keys_matching(
            &mut conn,
            "wait keys",
            &pattern,
            &["string"],
            settings.response_timeout,
        )
        .await?;
        let mut waits = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(party) = key.strip_prefix(prefix).and_then(party_of_wait_key) else {
                continue;
            };
            let call = async {
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<Option<Vec<u8>>>(&mut conn)
                    .await
                    .map_err(|error| Error::from_redis("wait keys", error))
            };
            let value = match bounded("wait keys", settings.response_timeout, call).await {
                Ok(value) => value,
                // Retyped since the scan: not an edge any more.
                Err(Error::WrongType { .. }) => None,
                Err(other) => return Err(other),
            };
            // An edge names a lock key of this prefix, as UTF-8 with a name
            // after the prefix; any other value is no edge of a waiter here.
            let lock = value
                .and_then(|value| String::from_utf8(value).ok())
                .and_then(|value| value.strip_prefix(prefix).map(str::to_owned))
                .filter(|lock| !lock.is_empty());
            if let Some(lock) = lock {
                waits.push(Waiting {
                    party: party.to_owned(),
                    lock,
                });
            }
        }
        waits.sort();
        Ok(waits)
    }
}

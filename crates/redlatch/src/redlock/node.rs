//! One master of a Redlock: its client, or why it could not be connected.

use crate::client::Client;
use crate::error::Error;

/// One master: its client, or why it could not be connected.
pub(crate) struct Node {
    /// How messages name it: the URL with its password hidden, or `node <i>`.
    pub(crate) label: String,
    pub(crate) client: Option<Client>,
    pub(crate) connect_error: Option<String>,
}

impl Node {
    /// The error a call on a node that never connected gives.
    pub(crate) fn not_connected(&self) -> Error {
        let detail = self
            .connect_error
            .clone()
            .unwrap_or_else(|| "not connected".to_owned());
        Error::Unavailable {
            op: "connect",
            source: redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                detail,
            )),
        }
    }
}

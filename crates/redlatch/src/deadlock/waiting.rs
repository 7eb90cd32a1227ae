//! One wait-for edge as read back from the server ([`Client::waits`](crate::Client::waits)).

/// One party waiting for one lock, as its wait-for edge says.
///
/// Ordered by party, then lock, as [`Client::waits`](crate::Client::waits)
/// returns them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Waiting {
    /// The waiting party ([`party_of`](crate::deadlock::party_of) of its
    /// owner field).
    pub party: String,
    /// The lock it waits for: its name, without the client's key prefix.
    pub lock: String,
}

//! One step of a wait-for cycle, as [`Error::Deadlock`](crate::Error::Deadlock) names it.

/// One lock of a wait-for cycle and who holds it.
///
/// A cycle is a list of links: the refused acquire waits for the first
/// link's lock; the party holding it waits for the next link's lock, and
/// so on; the last link's holder is the refused acquire's own party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitLink {
    /// The lock's key in Redis (the key prefix, then the name).
    pub lock: String,
    /// The holder's owner field, as written in the lock.
    pub holder: String,
    /// The holder's party ([`party_of`](crate::deadlock::party_of)).
    pub party: String,
}

impl std::fmt::Display for WaitLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} held by {} (party {})",
            self.lock, self.holder, self.party
        )
    }
}

/// The message of a deadlock: every lock and holder of the cycle in order.
pub(crate) fn describe(cycle: &[WaitLink]) -> String {
    let mut text = String::from("deadlock: this acquire waits for ");
    for (i, link) in cycle.iter().enumerate() {
        if i > 0 {
            text.push_str(", which waits for ");
        }
        text.push_str(&link.to_string());
    }
    text.push_str(if cycle.len() == 1 {
        ", which is this acquire's own party"
    } else {
        ", the last of which is this acquire's own party"
    });
    text
}

//! The replies every acquire script shares: `{1, token}` acquired,
//! `{2, token}` re-entered, `{-1, …}` the key holds another type.

use crate::error::Error;
use crate::lease_clock::LeaseInstant;

/// A hold an acquire script took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acquired {
    /// The fencing token of the hold (a re-entry's is the one it re-entered).
    pub(crate) token: u64,
    /// The owner held the lock already.
    pub(crate) reentered: bool,
    /// When the request left: the hold's validity counts from here.
    pub(crate) sent_at: LeaseInstant,
}

impl Acquired {
    /// The hold `reply` reports, if it reports one.
    pub(crate) fn read(reply: &[i64], sent_at: LeaseInstant) -> Option<Acquired> {
        match reply {
            [code @ (1 | 2), token, ..] => Some(Acquired {
                token: u64::try_from(*token).unwrap_or(0),
                reentered: *code == 2,
                sent_at,
            }),
            _ => None,
        }
    }
}

/// The error for an acquire reply that is neither a hold nor one of the
/// script's own answers: the key's type is wrong, or the reply is not the
/// script's.
pub(crate) fn unexpected(op: &'static str, key: &str, reply: &[i64]) -> Error {
    match reply {
        [-1, ..] => Error::WrongType {
            key: key.to_owned(),
        },
        other => Error::Protocol {
            op,
            detail: format!("{other:?}"),
        },
    }
}

//! `Released`: the reply every release script shares (`{1, receivers}`
//! unlocked, `{0, _}` one hold fewer, `{-1, _}` not held, `{-2, _}` wrong
//! type), read once, for every primitive's release and give-back.

use crate::error::{Error, Result};

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The last hold: the lock is deleted; the unlock message reached
    /// `receivers` subscription connections (this client's included; 0
    /// when it was not published: no waiter marked the hold).
    Unlocked { receivers: i64 },
    /// One hold dropped; the owner still holds it.
    Decremented,
}

/// Reads the reply every release script shares about the key `key`:
/// `{1, receivers}` unlocked, `{0, _}` one hold fewer, `{-1, _}` not held,
/// `{-2, _}` wrong type or a hold count that is not an integer (its field
/// removed).
pub(crate) fn released(key: &str, reply: &[i64]) -> Result<Released> {
    match reply {
        [1, receivers] => Ok(Released::Unlocked {
            receivers: *receivers,
        }),
        [0, _] => Ok(Released::Decremented),
        [-1, _] => Err(Error::NotHeld {
            name: key.to_owned(),
        }),
        [-2, _] => Err(Error::WrongType {
            key: key.to_owned(),
        }),
        other => Err(Error::Protocol {
            op: "release",
            detail: format!("{other:?}"),
        }),
    }
}

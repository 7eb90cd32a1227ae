//! The fair lock's keys: the lock hash of [`LockKeys`], the line beside it
//! ([`FairLine`], which the status of any lock reads too), the terms a
//! release hands the lock on with, and each waiter's own channel.

use crate::base::keys::{FairLine, LOCK_SPLIT, LockKeys};
use crate::error::Result;
use crate::scripts::keys::{one_slot, prefix_name};
use crate::transport::Connection;

/// The keys of one fair lock: the lock hash and counter of [`LockKeys`], plus
/// Redisson's `RFairLock` queue, its place deadlines and the per-waiter channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FairKeys {
    /// The lock hash, counter and shared channel, as for the reentrant lock.
    pub(crate) lock: LockKeys,
    /// The line: waiters in order, their deadlines and signs of life.
    pub(crate) line: FairLine,
    /// What a release needs to hand the lock to a redlatch waiter (its lease
    /// and W): `redlatch_fair_terms:{KEY}` (hash), where Redisson never looks.
    pub(crate) terms: String,
}

impl FairKeys {
    pub(crate) fn new(prefix: &str, name: &str) -> Result<FairKeys> {
        let lock = LockKeys::new(prefix, name)?;
        Ok(FairKeys {
            line: FairLine::of(&lock),
            terms: prefix_name("redlatch_fair_terms", &lock.key),
            lock,
        })
    }

    /// As [`LockKeys::per_name_counter`].
    pub(crate) fn per_name_counter(mut self, per_name: bool) -> FairKeys {
        self.lock = self.lock.per_name_counter(per_name);
        self
    }

    /// The channel that wakes one waiter: `redisson_lock__channel:{KEY}:<owner field>`.
    pub(crate) fn waiter_channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.lock.channel())
    }

    /// As [`LockKeys::checked_for`], with the line and its terms (the
    /// per-waiter channels extend the lock channel, so share its slot).
    pub(crate) fn checked_for(mut self, conn: &Connection) -> Result<FairKeys> {
        self.lock = self.lock.checked_for(conn)?;
        let (channel, token) = (self.lock.channel(), self.lock.token());
        let [queue, timeouts, alive] = self.line.keys();
        let others = [&*channel, &token, queue, timeouts, alive, &self.terms];
        one_slot(conn, &self.lock.key, &others, LOCK_SPLIT)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::keys::slot;

    #[test]
    fn fair_keys_follow_redisson_layout() {
        let fair = FairKeys::new("", "jobs").unwrap();
        assert_eq!(fair.line.queue, "redisson_lock_queue:{jobs}");
        assert_eq!(fair.terms, "redlatch_fair_terms:{jobs}");
        assert_eq!(
            fair.waiter_channel("u:1"),
            "redisson_lock__channel:{jobs}:u:1"
        );
    }

    #[test]
    fn a_waiters_channel_shares_the_locks_slot() {
        for name in ["order:42", "order:{42}"] {
            let fair = FairKeys::new("app:", name).unwrap();
            let home = slot(&fair.lock.key);
            for key in [&fair.terms, &fair.waiter_channel("u:1")] {
                assert_eq!(slot(key), home, "{key}");
            }
        }
    }
}

//! The local sold-out flag: once an order of a voucher answered `sold_out`
//! on this instance, later clicks on it answer 410 `sold_out` at once,
//! without Redis or the database, until the flag is cleared.
//!
//! A flag clears when stock comes back through this instance
//! ([`SoldOutFlags::clear`], called when an order is cancelled or expires)
//! or when an order of the voucher succeeds here. Other instances learn of
//! returned stock by looking again: every `--sold-out-recheck` (1 s) one
//! click goes through to Redis and the database; if it is sold out again
//! the flag stays for another period. `--sold-out-recheck 0s` turns the
//! flag off. The flag only saves work: Redis and the database still decide
//! every order that goes through.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

/// The flags of one instance (in [`AppState`](super::AppState)).
pub struct SoldOutFlags {
    recheck: Duration,
    /// Voucher id → until when clicks are answered from the flag.
    flags: RwLock<HashMap<i64, Instant>>,
}

impl SoldOutFlags {
    /// Flags that let one click through to look every `recheck`; a zero
    /// `recheck` never answers from a flag.
    pub fn new(recheck: Duration) -> SoldOutFlags {
        SoldOutFlags {
            recheck,
            flags: RwLock::new(HashMap::new()),
        }
    }

    /// Whether a click on `voucher_id` is answered `sold_out` from the flag.
    /// When the recheck period is over, the one caller told `false` is the
    /// look; the clicks after it are still answered from the flag for
    /// another period.
    pub fn answers(&self, voucher_id: i64) -> bool {
        let now = Instant::now();
        match self.flags.read().get(&voucher_id) {
            None => return false,
            Some(until) if now < *until => return true,
            Some(_) => {}
        }
        let mut flags = self.flags.write();
        match flags.get_mut(&voucher_id) {
            Some(until) if now >= *until => {
                *until = now + self.recheck;
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    /// An order of `voucher_id` answered `sold_out`.
    pub fn mark(&self, voucher_id: i64) {
        if self.recheck.is_zero() {
            return;
        }
        let until = Instant::now() + self.recheck;
        self.flags.write().insert(voucher_id, until);
    }

    /// Stock of `voucher_id` is there again: clicks go through.
    pub fn clear(&self, voucher_id: i64) {
        if self.flags.read().contains_key(&voucher_id) {
            self.flags.write().remove(&voucher_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_answers_until_cleared() {
        let flags = SoldOutFlags::new(Duration::from_secs(3600));
        assert!(!flags.answers(1));
        flags.mark(1);
        assert!(flags.answers(1));
        assert!(flags.answers(1));
        assert!(!flags.answers(2), "flags are per voucher");
        flags.clear(1);
        assert!(!flags.answers(1));
    }

    #[test]
    fn after_the_recheck_one_click_looks() {
        let flags = SoldOutFlags::new(Duration::from_millis(20));
        flags.mark(1);
        assert!(flags.answers(1));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!flags.answers(1), "the look goes through");
        assert!(flags.answers(1), "the others wait for it");
    }

    #[test]
    fn a_zero_recheck_turns_the_flag_off() {
        let flags = SoldOutFlags::new(Duration::ZERO);
        flags.mark(1);
        assert!(!flags.answers(1));
    }
}

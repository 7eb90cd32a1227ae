//! `--mix pay=P,cancel=C,expire=E`: what a buyer does with an accepted
//! order, in percent of the accepted orders.

use std::fmt;
use std::str::FromStr;

/// What the load does with one accepted order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// `POST /orders/{id}/pay`.
    Pay,
    /// `POST /orders/{id}/cancel`.
    Cancel,
    /// Nothing: the order stays pending until the service's payment timeout.
    Leave,
}

impl Action {
    /// "pay", "cancel" or "expire" (the `--mix` key).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Action::Pay => "pay",
            Action::Cancel => "cancel",
            Action::Leave => "expire",
        }
    }
}

/// The shares of the follow-ups, in percent; they sum to 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    /// Orders paid.
    pub pay: u8,
    /// Orders cancelled.
    pub cancel: u8,
    /// Orders left to expire.
    pub expire: u8,
}

impl Mix {
    /// Buying only: every order is left as it is (no `--mix`).
    pub const BUY_ONLY: Mix = Mix {
        pay: 0,
        cancel: 0,
        expire: 100,
    };

    /// The follow-up of the `k`-th accepted order (0-based, in the order the
    /// answers came). Slot `k * 37 mod 100` walks all hundred slots once per
    /// hundred orders (37 is prime to 100), so every hundred orders get the
    /// shares exactly and the actions interleave rather than come in blocks.
    pub(crate) fn action(self, k: u64) -> Action {
        let slot = (k % 100 * 37 % 100) as u8;
        if slot < self.pay {
            Action::Pay
        } else if slot < self.pay + self.cancel {
            Action::Cancel
        } else {
            Action::Leave
        }
    }
}

impl Default for Mix {
    fn default() -> Self {
        Mix::BUY_ONLY
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pay={},cancel={},expire={}",
            self.pay, self.cancel, self.expire
        )
    }
}

/// A `--mix` text that is not `key=percent` pairs over pay, cancel and
/// expire summing to 100.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--mix {text:?}: {reason} (expected e.g. pay=60,cancel=20,expire=20, summing to 100)")]
pub struct MixError {
    text: String,
    reason: String,
}

impl FromStr for Mix {
    type Err = MixError;

    fn from_str(text: &str) -> Result<Mix, MixError> {
        let fail = |reason: String| MixError {
            text: text.to_owned(),
            reason,
        };
        let mut shares: [Option<u8>; 3] = [None; 3];
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| fail(format!("{part:?} is not key=percent")))?;
            let slot = match key.trim() {
                "pay" => 0,
                "cancel" => 1,
                "expire" => 2,
                other => return Err(fail(format!("unknown key {other:?}"))),
            };
            let share: u8 = value
                .trim()
                .parse()
                .ok()
                .filter(|share| *share <= 100)
                .ok_or_else(|| fail(format!("{value:?} is not a percent 0..=100")))?;
            if shares[slot].replace(share).is_some() {
                return Err(fail(format!("{} given twice", key.trim())));
            }
        }
        let [pay, cancel, expire] = shares.map(Option::unwrap_or_default);
        let sum = u16::from(pay) + u16::from(cancel) + u16::from(expire);
        if sum != 100 {
            return Err(fail(format!("the shares sum to {sum}")));
        }
        Ok(Mix {
            pay,
            cancel,
            expire,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_reads_back_and_missing_keys_are_zero() {
        let mix: Mix = "pay=60, cancel=20,expire=20".parse().expect("valid");
        assert_eq!((mix.pay, mix.cancel, mix.expire), (60, 20, 20));
        assert_eq!(mix.to_string().parse::<Mix>(), Ok(mix));
        let pay_only: Mix = "pay=100".parse().expect("valid");
        assert_eq!((pay_only.cancel, pay_only.expire), (0, 0));
    }

    #[test]
    fn bad_mixes_are_refused_with_the_reason() {
        for (text, reason) in [
            ("pay=60,cancel=20", "sum to 80"),
            ("pay=60,refund=40", "unknown key"),
            ("pay=50,pay=50", "twice"),
            ("pay=150", "percent"),
            ("pay", "key=percent"),
            ("", "sum to 0"),
        ] {
            let error = text.parse::<Mix>().expect_err(text).to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn every_hundred_orders_get_the_shares_exactly() {
        let mix: Mix = "pay=55,cancel=30,expire=15".parse().expect("valid");
        for start in [0u64, 100, 12_300] {
            let mut counts = [0u32; 3];
            for k in start..start + 100 {
                counts[match mix.action(k) {
                    Action::Pay => 0,
                    Action::Cancel => 1,
                    Action::Leave => 2,
                }] += 1;
            }
            assert_eq!(counts, [55, 30, 15]);
        }
        assert!((0..50).all(|k| Mix::BUY_ONLY.action(k) == Action::Leave));
    }

    #[test]
    fn actions_interleave_in_a_short_run() {
        let mix: Mix = "pay=50,cancel=25,expire=25".parse().expect("valid");
        let first: Vec<Action> = (0..8).map(|k| mix.action(k)).collect();
        for action in [Action::Pay, Action::Cancel, Action::Leave] {
            assert!(first.contains(&action), "{first:?}");
        }
    }
}

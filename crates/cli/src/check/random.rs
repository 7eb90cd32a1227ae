//! xorshift64: random enough for the lab's wait times and the soak's fault
//! mix, reproducible from a seed, no dependency.

use super::clock::now_ns;

/// A small seeded generator.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    /// Seeded from the clock and the process id: differs per worker.
    pub fn seeded() -> Random {
        Random::from_seed(now_ns() ^ u64::from(std::process::id()).rotate_left(32))
    }

    /// The same sequence for the same seed.
    pub fn from_seed(seed: u64) -> Random {
        // Zero is xorshift's one fixed point; mix the seed so that small
        // seeds do not start with small numbers.
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `low..=high` (`low` when `high <= low`).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if high <= low {
            return low;
        }
        low + self.0 % (high - low + 1)
    }

    /// One of `items`, or `None` when there are none.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let last = u64::try_from(items.len()).ok()?.checked_sub(1)?;
        items.get(usize::try_from(self.between(0, last)).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers_within_bounds() {
        let mut one = Random::from_seed(7);
        let mut two = Random::from_seed(7);
        for _ in 0..1000 {
            let number = one.between(2, 20);
            assert_eq!(number, two.between(2, 20));
            assert!((2..=20).contains(&number));
        }
        assert_eq!(Random::from_seed(0).between(5, 5), 5);
        assert_eq!(one.pick::<u8>(&[]), None);
        assert_eq!(one.pick(&[9]), Some(&9));
    }
}

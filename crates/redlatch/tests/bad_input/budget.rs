//! How many random cases the property tests of this binary run: a short
//! budget by default (CI), `REDLATCH_FUZZ_CASES` for a long run (see
//! docs/TESTING.md), `REDLATCH_FUZZ_SEED` to replay one.

use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Cases per property: `REDLATCH_FUZZ_CASES`, or `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("REDLATCH_FUZZ_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// A runner of `cases(default)` cases, seeded from `REDLATCH_FUZZ_SEED`
/// or the clock; the seed is printed so that a failure can be replayed.
pub fn runner(default: u32) -> TestRunner {
    let seed: u64 = std::env::var("REDLATCH_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64)
        });
    eprintln!("REDLATCH_FUZZ_SEED={seed}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: cases(default),
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

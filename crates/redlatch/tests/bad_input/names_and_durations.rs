//! Random lock names and leases: every call either takes the lock or
//! fails with the typed error the documented limits predict; never a panic.

use std::time::Duration;

use proptest::prelude::*;
use redlatch::{Error, Settings};

const MAX_LEASE: Duration = Settings::MAX_LEASE;
const MAX_NAME_LEN: usize = Settings::MAX_NAME_LEN;
const MIN_LEASE: Duration = Settings::MIN_LEASE;

use super::budget;
use crate::common;

fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<String>(),
        "[{}:#\\\\ \\n\\t\\x00a-z]{1,12}",
        (MAX_NAME_LEN - 3..MAX_NAME_LEN + 3).prop_map(|len| "n".repeat(len)),
        // Multi-byte characters around the limit: it counts bytes.
        (340usize..345).prop_map(|len| "é€".repeat(len / 2)),
    ]
}

fn leases() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..3_000).prop_map(Duration::from_micros),
        (0u64..120_000).prop_map(Duration::from_millis),
        Just(MAX_LEASE),
        Just(MAX_LEASE + Duration::from_nanos(1)),
        any::<u64>().prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

#[test]
fn random_names_and_leases_acquire_or_fail_as_the_limits_say() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = common::server();
    let client = runtime.block_on(common::client(&server));
    let mut runner = budget::runner(256);
    let outcome = runner.run(&(names(), leases()), |(name, lease)| {
        let bad_name = name.is_empty() || name.len() > MAX_NAME_LEN;
        let bad_lease = lease < MIN_LEASE || lease > MAX_LEASE;
        let lock = client.lock(name.as_str());
        let result = runtime.block_on(lock.clone().with_lease(lease).try_acquire());
        match result {
            Ok(Some(guard)) => {
                prop_assert!(!bad_name && !bad_lease, "took {name:?} for {lease:?}");
                prop_assert!(guard.is_held() || lease < Duration::from_millis(50));
                prop_assert!(guard.token() >= 1);
                // Given back at once, or gone with its (short) lease.
                let released = runtime.block_on(guard.release());
                prop_assert!(
                    matches!(released, Ok(()) | Err(Error::NotHeld { .. })),
                    "{released:?}"
                );
            }
            Ok(None) => prop_assert!(false, "{name:?} was free, yet not taken"),
            Err(Error::InvalidName { .. }) => prop_assert!(bad_name, "{name:?}"),
            Err(Error::InvalidDuration { .. }) => prop_assert!(bad_lease, "{lease:?}"),
            Err(other) => prop_assert!(false, "untyped failure for {name:?}, {lease:?}: {other}"),
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

//! The counts' try-sets (`scripts/lib/set_once.lua`) and the semaphore's
//! add, made by `Client::handle::<P>`, cut off in flight on a cluster: the
//! re-send learns the first run's reply (a count set is answered "set",
//! not "already set"), and nothing runs twice.

use redlatch::{CountDownLatch, Error, Semaphore};

use super::{CUT_OFF_ROUNDS, cut_off_in_flight, debug_cluster, enough_rounds, patient_client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_set_cut_off_in_flight_answers_set_and_sets_once() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let (mut valid, mut tries) = (0, 0);
    let mut wrong = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let (semaphore_name, latch_name) = (
            format!("semaphore:cut-set:{tries}"),
            format!("latch:cut-set:{tries}"),
        );
        let semaphore = client.handle::<Semaphore>(semaphore_name.as_str());
        let latch = client.handle::<CountDownLatch>(latch_name.as_str());
        // The client's connections to the names' masters are up.
        assert_eq!(semaphore.available_permits().await.unwrap(), 0);
        assert_eq!(latch.count().await.unwrap(), 0);
        let set = {
            let semaphore = semaphore.clone();
            async move { semaphore.try_set_permits(7).await }
        };
        let semaphore_outcome = cut_off_in_flight(&cluster, &semaphore_name, set).await;
        let set = {
            let latch = latch.clone();
            async move { latch.try_set_count(7).await }
        };
        let latch_outcome = cut_off_in_flight(&cluster, &latch_name, set).await;
        assert_eq!(semaphore.available_permits().await.unwrap(), 7);
        assert_eq!(latch.count().await.unwrap(), 7);
        for (what, outcome) in [("semaphore", semaphore_outcome), ("latch", latch_outcome)] {
            let Some(outcome) = outcome else { continue };
            valid += 1;
            // Set by this call: "already set" would be the re-send's own run.
            if !matches!(outcome, Ok(true) | Err(Error::OutcomeUnknown { .. })) {
                wrong.push(format!("{what}: {outcome:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "try-sets cut off answered {wrong:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_added_cut_off_in_flight_are_added_once() {
    let cluster = debug_cluster();
    let client = patient_client(&cluster, 3).await;
    let semaphore = client.handle::<Semaphore>("pool:add-cut");
    assert!(semaphore.try_set_permits(100).await.unwrap());
    assert_eq!(semaphore.add_permits(0).await.unwrap(), 100);
    let (mut valid, mut tries) = (0, 0);
    let mut expected = 100;
    let mut outcomes = Vec::new();
    while valid < CUT_OFF_ROUNDS {
        enough_rounds(valid, tries);
        tries += 1;
        let add = {
            let semaphore = semaphore.clone();
            async move { semaphore.add_permits(1).await }
        };
        let outcome = cut_off_in_flight(&cluster, "pool:add-cut", add).await;
        let available = semaphore.available_permits().await.unwrap();
        assert!(
            available == expected || available == expected + 1,
            "one add of 1 took the count from {expected} to {available} ({outcome:?})"
        );
        if let Some(outcome) = outcome {
            valid += 1;
            if let Ok(count) = outcome {
                assert_eq!(count, available, "the add's answer is the count");
            }
            outcomes.push(format!("{outcome:?}"));
        }
        expected = available;
    }
    eprintln!("adds cut off in flight answered {outcomes:?}");
}

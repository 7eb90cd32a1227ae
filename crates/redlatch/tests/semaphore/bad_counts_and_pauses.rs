//! The counts' first value (`scripts/lib/set_once.lua`, shared by the
//! semaphore's and the latch's try-set) on keys holding what the other
//! calls refuse, and calls that change a count while the server is paused
//! (the request reaches the server after the caller gave up on it).

use std::time::Duration;

use redis::AsyncCommands;
use redlatch::Error;

use crate::common;

/// Strings a decimal 64-bit integer is not, though Lua's `tonumber` reads
/// most of them as a number.
const NOT_INTEGERS: [&str; 10] = [
    "1.5",
    " 3",
    "0x10",
    "1e3",
    "+3",
    "inf",
    "nan",
    "99999999999999999999",
    "",
    "ten",
];

#[tokio::test]
async fn a_count_the_semaphores_acquire_refuses_is_refused_by_its_try_set_and_read_too() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let mut wrong = Vec::new();
    for (n, value) in NOT_INTEGERS.iter().enumerate() {
        let name = format!("bad-{n}");
        let () = admin.set(&name, *value).await.unwrap();
        let semaphore = client.handle::<redlatch::Semaphore>(name.as_str());
        // The reference: the acquire checks the count before DECRBY.
        let acquire = semaphore.try_acquire().await.map(|permit| permit.is_some());
        assert!(
            matches!(acquire, Err(Error::WrongValue { .. })),
            "{value:?}: acquire {acquire:?}"
        );
        let set = semaphore.try_set_permits(1).await;
        if !matches!(set, Err(Error::WrongValue { .. })) {
            wrong.push(format!("{value:?}: try_set_permits {set:?}"));
        }
        let available = semaphore.available_permits().await;
        if !matches!(available, Err(Error::WrongValue { .. })) {
            wrong.push(format!("{value:?}: available_permits {available:?}"));
        }
        let kept: String = admin.get(&name).await.unwrap();
        assert_eq!(kept, *value, "left alone");
    }
    assert!(
        wrong.is_empty(),
        "{} answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[tokio::test]
async fn a_count_the_latch_cannot_count_down_is_refused_by_its_try_set() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    for (n, value) in NOT_INTEGERS.iter().enumerate() {
        let name = format!("bad-{n}");
        let () = admin.set(&name, *value).await.unwrap();
        let latch = client.handle::<redlatch::CountDownLatch>(name.as_str());
        for (call, outcome) in [
            ("try_set_count", latch.try_set_count(1).await.map(drop)),
            ("count", latch.count().await.map(drop)),
            ("count_down", latch.count_down().await.map(drop)),
        ] {
            assert!(
                matches!(outcome, Err(Error::WrongValue { .. })),
                "{value:?}: {call} {outcome:?}"
            );
        }
        let kept: String = admin.get(&name).await.unwrap();
        assert_eq!(kept, *value, "left alone");
    }
    // The edges of a 64-bit count: set, read and counted down exactly.
    for (n, value) in ["9223372036854775807", "0", "-1"].iter().enumerate() {
        let name = format!("edge-{n}");
        let () = admin.set(&name, *value).await.unwrap();
        let latch = client.count_down_latch(name.as_str());
        assert!(
            !latch.try_set_count(1).await.unwrap(),
            "{value}: has a count"
        );
    }
    let top = client.count_down_latch("edge-0");
    assert_eq!(top.count().await.unwrap(), i64::MAX as u64);
    assert_eq!(top.count_down().await.unwrap(), i64::MAX as u64 - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_changed_while_the_server_is_paused_are_reported_as_maybe_changed() {
    let server = common::server();
    let client = common::client(&server).await; // 500 ms response timeout
    let semaphore = client.handle::<redlatch::Semaphore>("paused-pool");
    let permits = client.handle::<redlatch::PermitSemaphore>("paused-permits");
    let fresh = client.handle::<redlatch::Semaphore>("paused-fresh");
    let latch = client.handle::<redlatch::CountDownLatch>("paused-latch");
    assert!(semaphore.try_set_permits(5).await.unwrap());
    assert!(permits.try_set_permits(5).await.unwrap());
    server.pause().unwrap();
    let bounded = Duration::from_secs(10);
    let outcomes = [
        (
            "semaphore add_permits",
            tokio::time::timeout(bounded, semaphore.add_permits(1))
                .await
                .map(|outcome| outcome.map(drop)),
        ),
        (
            "permit semaphore add_permits",
            tokio::time::timeout(bounded, permits.add_permits(1))
                .await
                .map(|outcome| outcome.map(drop)),
        ),
        (
            "semaphore try_set_permits",
            tokio::time::timeout(bounded, fresh.try_set_permits(3))
                .await
                .map(|outcome| outcome.map(drop)),
        ),
        (
            "latch try_set_count",
            tokio::time::timeout(bounded, latch.try_set_count(3))
                .await
                .map(|outcome| outcome.map(drop)),
        ),
    ];
    server.resume().unwrap();
    // The requests were in the server's socket: they run once it does.
    let ran = common::eventually(Duration::from_secs(5), || {
        let (semaphore, permits, fresh, latch) = (
            semaphore.clone(),
            permits.clone(),
            fresh.clone(),
            latch.clone(),
        );
        async move {
            semaphore.available_permits().await.ok() == Some(6)
                && permits.available_permits().await.ok() == Some(6)
                && fresh.available_permits().await.ok() == Some(3)
                && latch.count().await.ok() == Some(3)
        }
    })
    .await;
    assert!(ran, "the calls did not run after the resume");
    // They ran: an error that calls them safe to repeat misleads the caller.
    let mut wrong = Vec::new();
    for (call, outcome) in outcomes {
        let error = outcome
            .expect("bounded by the response timeout")
            .expect_err("answered by a paused server");
        if !matches!(error, Error::OutcomeUnknown { .. }) || error.is_transient() {
            wrong.push(format!(
                "{call}: {error:?} (is_transient: {})",
                error.is_transient()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "calls that ran reported as:\n{}",
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_while_the_server_is_paused_is_reported_as_maybe_counted_and_runs_once() {
    let server = common::server();
    let client = common::client(&server).await; // 500 ms response timeout
    let latch = client.handle::<redlatch::CountDownLatch>("paused-latch");
    assert!(latch.try_set_count(5).await.unwrap());
    server.pause().unwrap();
    let during = tokio::time::timeout(Duration::from_secs(10), latch.count_down())
        .await
        .expect("bounded by the response timeout");
    server.resume().unwrap();
    let error = during.expect_err("answered by a paused server");
    assert!(
        matches!(error, Error::OutcomeUnknown { .. }) && !error.is_transient(),
        "{error:?}"
    );
    let counted = common::eventually(Duration::from_secs(5), || {
        let latch = latch.clone();
        async move { latch.count().await.ok() == Some(4) }
    })
    .await;
    assert!(counted, "the count down did not run once after the resume");
    // And not again later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(latch.count().await.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_whose_connection_is_killed_in_flight_counts_at_most_once() {
    let server = common::server();
    let client = common::client(&server).await;
    let mut admin = common::admin(&server).await;
    let latch = client.handle::<redlatch::CountDownLatch>("killed-latch");
    assert!(latch.try_set_count(5).await.unwrap());
    // The server reads the count down and holds it (a write, paused).
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(5000)
        .arg("WRITE")
        .query_async(&mut admin)
        .await
        .unwrap();
    let in_flight = tokio::spawn({
        let latch = latch.clone();
        async move { latch.count_down().await }
    });
    let held = common::eventually(Duration::from_secs(5), || {
        let mut admin = admin.clone();
        async move {
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut admin)
                .await
                .unwrap();
            list.lines().any(|line| line.contains("flags=b"))
        }
    })
    .await;
    assert!(held, "the count down never reached the paused server");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 1);
    let () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async(&mut admin)
        .await
        .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("no hang")
        .unwrap();
    let after = common::eventually(Duration::from_secs(5), || {
        let latch = latch.clone();
        async move { latch.count().await.is_ok() }
    })
    .await;
    assert!(after, "the client did not reconnect");
    let count = latch.count().await.unwrap();
    match &outcome {
        Ok(left) => assert_eq!((*left, count), (4, 4), "counted once"),
        Err(error) => {
            assert!(matches!(error, Error::OutcomeUnknown { .. }), "{error:?}");
            assert!(count == 5 || count == 4, "counted {} times", 5 - count);
        }
    }
    // Nothing re-sent later: the next count down takes exactly one.
    assert_eq!(latch.count_down().await.unwrap(), count - 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(latch.count().await.unwrap(), count - 1);
}

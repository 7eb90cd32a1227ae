//! Every Lua script of the library, called raw against a real redis-server
//! with random keys (holding random types and values) and random argument
//! values, as many as the script reads (the library always passes them
//! all): Redis keeps answering, no call touches a key it was not given,
//! and a lock held meanwhile by a real client is not disturbed.
//!
//! Not asserted, printed: which scripts failed *after* writing to a key
//! they were given. Redis does not roll a script back, so such a write
//! stays; it takes arguments the library never sends (a lease beyond its
//! 30-day limit, an empty owner, one key passed twice, an unknown publish
//! command), and the scripts rely on the library's validation for those.

use std::time::Duration;

use proptest::prelude::*;

use super::budget;
use crate::common;

/// The shared parts some scripts are loaded with, in front.
const CHECKS: &str = include_str!("../../src/scripts/lib/checks.lua");
const FAIR_LINE: &str = include_str!("../../src/scripts/lib/fair_line.lua");
const LEASE: &str = include_str!("../../src/scripts/lib/lease.lua");
const MEMORY: &str = include_str!("../../src/scripts/lib/memory.lua");
const SET_ONCE: &str = include_str!("../../src/scripts/lib/set_once.lua");
const CHECKS_AND_SET_ONCE: &str = concat!(
    include_str!("../../src/scripts/lib/checks.lua"),
    include_str!("../../src/scripts/lib/set_once.lua")
);
const CHECKS_LEASE_AND_MEMORY: &str = concat!(
    include_str!("../../src/scripts/lib/checks.lua"),
    include_str!("../../src/scripts/lib/lease.lua"),
    include_str!("../../src/scripts/lib/memory.lua")
);
const CHECKS_FAIR_LINE_LEASE_AND_MEMORY: &str = concat!(
    include_str!("../../src/scripts/lib/checks.lua"),
    include_str!("../../src/scripts/lib/fair_line.lua"),
    include_str!("../../src/scripts/lib/lease.lua"),
    include_str!("../../src/scripts/lib/memory.lua")
);
const CHECKS_AND_MEMORY: &str = concat!(
    include_str!("../../src/scripts/lib/checks.lua"),
    include_str!("../../src/scripts/lib/memory.lua")
);
const CHECKS_AND_LEASE: &str = concat!(
    include_str!("../../src/scripts/lib/checks.lua"),
    include_str!("../../src/scripts/lib/lease.lua")
);

/// Every script, and the shared parts it is loaded with.
const SCRIPTS: [(&str, &str, &str); 29] = [
    (
        "acquire",
        include_str!("../../src/lock/acquire.lua"),
        CHECKS_AND_LEASE,
    ),
    (
        "reenter",
        include_str!("../../src/base/reenter.lua"),
        CHECKS_AND_LEASE,
    ),
    (
        "release",
        include_str!("../../src/lock/release.lua"),
        CHECKS_LEASE_AND_MEMORY,
    ),
    ("renew", include_str!("../../src/base/renew.lua"), LEASE),
    (
        "force_unlock",
        include_str!("../../src/base/force_unlock.lua"),
        "",
    ),
    ("status", include_str!("../../src/base/status.lua"), ""),
    (
        "raise_token",
        include_str!("../../src/lock/raise_token.lua"),
        "",
    ),
    (
        "fair_acquire",
        include_str!("../../src/fair_lock/fair_acquire.lua"),
        CHECKS_FAIR_LINE_LEASE_AND_MEMORY,
    ),
    (
        "fair_release",
        include_str!("../../src/fair_lock/fair_release.lua"),
        CHECKS_FAIR_LINE_LEASE_AND_MEMORY,
    ),
    (
        "fair_leave",
        include_str!("../../src/fair_lock/fair_leave.lua"),
        FAIR_LINE,
    ),
    (
        "rw_read_acquire",
        include_str!("../../src/rw_lock/rw_read_acquire.lua"),
        CHECKS_AND_LEASE,
    ),
    (
        "rw_write_acquire",
        include_str!("../../src/rw_lock/rw_write_acquire.lua"),
        CHECKS_LEASE_AND_MEMORY,
    ),
    (
        "rw_read_release",
        include_str!("../../src/rw_lock/rw_read_release.lua"),
        CHECKS_LEASE_AND_MEMORY,
    ),
    (
        "rw_write_release",
        include_str!("../../src/rw_lock/rw_write_release.lua"),
        CHECKS_LEASE_AND_MEMORY,
    ),
    (
        "rw_writer_leave",
        include_str!("../../src/rw_lock/rw_writer_leave.lua"),
        "",
    ),
    (
        "rw_read_renew",
        include_str!("../../src/rw_lock/rw_read_renew.lua"),
        LEASE,
    ),
    (
        "semaphore_try_set",
        include_str!("../../src/semaphore/semaphore_try_set.lua"),
        SET_ONCE,
    ),
    (
        "semaphore_add",
        include_str!("../../src/semaphore/semaphore_add.lua"),
        MEMORY,
    ),
    (
        "semaphore_acquire",
        include_str!("../../src/semaphore/semaphore_acquire.lua"),
        CHECKS,
    ),
    (
        "semaphore_release",
        include_str!("../../src/semaphore/semaphore_release.lua"),
        MEMORY,
    ),
    (
        "semaphore_available",
        include_str!("../../src/semaphore/semaphore_available.lua"),
        "",
    ),
    (
        "permit_acquire",
        include_str!("../../src/semaphore/permit_acquire.lua"),
        CHECKS,
    ),
    (
        "permit_release",
        include_str!("../../src/semaphore/permit_release.lua"),
        "",
    ),
    (
        "permit_available",
        include_str!("../../src/semaphore/permit_available.lua"),
        "",
    ),
    (
        "permit_renew",
        include_str!("../../src/semaphore/permit_renew.lua"),
        MEMORY,
    ),
    (
        "latch_try_set",
        include_str!("../../src/count_down_latch/latch_try_set.lua"),
        CHECKS_AND_SET_ONCE,
    ),
    (
        "latch_count_down",
        include_str!("../../src/count_down_latch/latch_count_down.lua"),
        CHECKS_AND_MEMORY,
    ),
    (
        "latch_count",
        include_str!("../../src/count_down_latch/latch_count.lua"),
        CHECKS,
    ),
    (
        "latch_delete",
        include_str!("../../src/count_down_latch/latch_delete.lua"),
        CHECKS,
    ),
];

/// The keys the scripts are given; the canary lock is not among them.
const POOL: [&str; 5] = [
    "fz",
    "redisson_lock_token:{fz}",
    "redisson_lock__channel:{fz}",
    "fz:queue",
    "fz:timeout",
];

/// What a pool key holds before a call.
#[derive(Debug, Clone)]
enum Content {
    Nothing,
    Text(String),
    Hash(Vec<(String, String)>),
    ZSet(Vec<(f64, String)>),
    List(Vec<String>),
}

/// An argument: numbers near the edges, owner-like strings, junk.
fn arguments() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just(String::new()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("-1".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("1e308".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("0x10".to_owned()),
        (0u64..100_000).prop_map(|number| number.to_string()),
        any::<i64>().prop_map(|number| number.to_string()),
        "[a-f0-9]{8}:[a-z]{1,6}",
        "[a-f0-9]{8}:[a-z]{1,6}:write",
        any::<String>(),
    ]
}

fn contents() -> impl Strategy<Value = Content> {
    let word = arguments();
    prop_oneof![
        3 => Just(Content::Nothing),
        1 => word.clone().prop_map(Content::Text),
        1 => prop::collection::vec((word.clone(), word.clone()), 1..3).prop_map(Content::Hash),
        1 => prop::collection::vec((-1e12f64..1e12, word.clone()), 1..3).prop_map(Content::ZSet),
        1 => prop::collection::vec(word, 1..3).prop_map(Content::List),
    ]
}

/// A call: which script, which pool keys in which order, which arguments
/// (as many as the script reads, sometimes a few more), and what each pool
/// key holds first.
fn calls() -> impl Strategy<Value = (usize, Vec<usize>, Vec<String>, Vec<Content>)> {
    (0..SCRIPTS.len()).prop_flat_map(|script| {
        let (keys, args) = arity(SCRIPTS[script].1);
        (
            Just(script),
            prop::collection::vec(0..POOL.len(), keys..=keys),
            prop::collection::vec(arguments(), args..args + 3),
            prop::collection::vec(contents(), POOL.len()),
        )
    })
}

/// The highest `KEYS[n]` and `ARGV[n]` a script reads.
fn arity(source: &str) -> (usize, usize) {
    let highest = |table: &str| {
        source
            .match_indices(table)
            .filter_map(|(at, _)| {
                let rest = &source[at + table.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<usize>().ok()
            })
            .max()
            .unwrap_or(0)
    };
    (highest("KEYS["), highest("ARGV["))
}

fn fill(conn: &mut redis::Connection, key: &str, content: &Content) {
    let _: () = redis::cmd("DEL").arg(key).query(conn).expect("DEL");
    let cmd = match content {
        Content::Nothing => return,
        Content::Text(text) => redis::cmd("SET").arg(key).arg(text).clone(),
        Content::Hash(fields) => {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(key);
            for (field, value) in fields {
                cmd.arg(field).arg(value);
            }
            cmd
        }
        Content::ZSet(members) => {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg(key);
            for (score, member) in members {
                cmd.arg(*score).arg(member);
            }
            cmd
        }
        Content::List(items) => {
            let mut cmd = redis::cmd("RPUSH");
            cmd.arg(key);
            for item in items {
                cmd.arg(item);
            }
            cmd
        }
    };
    let _: redis::Value = cmd.query(conn).expect("fill a pool key");
}

/// Every pool key's serialized value and whether it expires.
fn snapshot(conn: &mut redis::Connection) -> Vec<(Option<Vec<u8>>, bool)> {
    POOL.iter()
        .map(|key| {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query(conn).expect("DUMP");
            let ttl: i64 = redis::cmd("PTTL").arg(key).query(conn).expect("PTTL");
            (dump, ttl >= 0)
        })
        .collect()
}

#[test]
fn every_script_called_with_random_input_touches_only_its_keys_and_spares_other_locks() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = common::server();
    let client = runtime.block_on(common::client(&server));
    let canary = runtime
        .block_on(client.lock("canary").try_acquire())
        .expect("the canary lock")
        .expect("free");
    let conn = server.conn();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    // The runner takes a `Fn`: the connection and counts live in cells.
    let conn = std::cell::RefCell::new(conn);
    let failed_calls = std::cell::Cell::new(0u64);
    let calls_made = std::cell::Cell::new(0u64);
    // Scripts that failed after writing to a key they were given: with
    // arguments the library never sends, they rely on its validation.
    let partial = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let mut runner = budget::runner(400);
    let outcome = runner.run(&calls(), |(script, keys, args, contents)| {
        let (name, body, prelude) = SCRIPTS[script];
        let source = format!("{prelude}{body}");
        let mut conn = conn.borrow_mut();
        for (key, content) in POOL.iter().zip(&contents) {
            fill(&mut conn, key, content);
        }
        let before = snapshot(&mut conn);
        let mut eval = redis::cmd("EVAL");
        eval.arg(&source).arg(keys.len());
        for &key in &keys {
            eval.arg(POOL[key]);
        }
        for arg in &args {
            eval.arg(arg);
        }
        calls_made.set(calls_made.get() + 1);
        let reply = eval.query::<redis::Value>(&mut conn);
        if let Err(error) = &reply {
            prop_assert!(
                error.kind() != redis::ErrorKind::Io,
                "{name}: the server stopped answering: {error}"
            );
            failed_calls.set(failed_calls.get() + 1);
        }
        let after = snapshot(&mut conn);
        for (index, key) in POOL.iter().enumerate() {
            if keys.contains(&index) {
                if reply.is_err() && before[index] != after[index] {
                    partial.borrow_mut().insert(name);
                }
            } else {
                prop_assert_eq!(
                    &before[index],
                    &after[index],
                    "{} wrote {}, a key it was not given: keys {:?}, args {:?}",
                    name,
                    key,
                    keys,
                    args
                );
            }
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    eprintln!(
        "{} raw script calls, {} refused with an error reply; failed after a write to their own keys: {:?}",
        calls_made.get(),
        failed_calls.get(),
        partial.borrow()
    );
    let mut conn = conn.into_inner();
    let pong: String = redis::cmd("PING").query(&mut conn).expect("PING");
    assert_eq!(pong, "PONG");
    assert!(canary.is_held(), "the canary lock was disturbed");
    let holders: i64 = redis::cmd("HLEN")
        .arg("canary")
        .query(&mut conn)
        .expect("HLEN");
    assert_eq!(
        holders, 2,
        "the canary lock's hash was touched (owner and token)"
    );
    runtime
        .block_on(canary.release())
        .expect("the canary lock is still ours");
}
